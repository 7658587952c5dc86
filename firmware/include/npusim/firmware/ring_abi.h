// The contract between the host runtime and the command-processor firmware: where things live in device memory and
// how commands are laid out. The firmware sees the same numbers as `.equ` lines generated from this list at build
// time (ring_abi.inc), so the two sides cannot disagree.
#pragma once

#include <cstdint>

// NPUSIM_RING_ABI(NAME, value)
#define NPUSIM_RING_ABI(X)                                                                     \
  X(RING_BASE, 0x1000)  /* the command ring's header, then its slots                    */     \
  X(RING_HEAD, 0)       /* header offset: commands the firmware has consumed (counter)  */     \
  X(RING_TAIL, 8)       /* header offset: commands the host has written (counter)       */     \
  X(RING_COMPLETED, 16) /* header offset: sequence number of the last completed command */     \
  X(RING_STATUS, 24)    /* header offset: status of the last completed command          */     \
  X(RING_SLOTS, 64)     /* offset of slot 0 from RING_BASE                              */     \
  X(RING_CAPACITY, 64)  /* slots in the ring (a power of two)                           */     \
  X(SLOT_SHIFT, 6)      /* log2 of the slot size: 64-byte slots                         */     \
  X(SLOT_KIND, 0)       /* slot offsets                                                 */     \
  X(SLOT_ARG0, 8)                                                                              \
  X(SLOT_ARG1, 16)                                                                             \
  X(SLOT_ARG2, 24)                                                                             \
  X(SLOT_SEQUENCE, 32)                                                                         \
  X(COMMAND_LAUNCH, 1)   /* arg0 program, arg1 argument block, arg2 core mask            */    \
  X(COMMAND_COPY_H2D, 2) /* arg0 device destination, arg1 host source, arg2 bytes        */    \
  X(COMMAND_COPY_D2H, 3) /* arg0 host destination, arg1 device source, arg2 bytes        */    \
  X(COMMAND_COPY_D2D, 4) /* arg0 device destination, arg1 device source, arg2 bytes      */    \
  X(STATUS_UNKNOWN_COMMAND, 0xffff)                                                            \
  X(FIRMWARE_BASE, 0x10000) /* where the firmware image is loaded and starts                */ \
  X(HEAP_BASE, 0x100000)    /* first byte the device allocator hands out                    */

namespace npusim::firmware {
#define NPUSIM_RING_ABI_CONSTANT(name, value) inline constexpr uint64_t name = value;
NPUSIM_RING_ABI(NPUSIM_RING_ABI_CONSTANT)
#undef NPUSIM_RING_ABI_CONSTANT

// One 64-byte command slot as the host writes it.
struct CommandSlot {
  uint64_t kind, arg0, arg1, arg2, sequence, reserved[3];
};
static_assert(sizeof(CommandSlot) == (1u << SLOT_SHIFT));

// The assembled firmware image, embedded at build time.
const uint64_t* firmware_image();
uint64_t firmware_image_words();
}  // namespace npusim::firmware
