// The contract between the host runtime and the command-processor firmware: where things live in device memory and
// how commands are laid out. The firmware sees the same numbers as `.equ` lines generated from this list at build
// time (ring_abi.inc), so the two sides cannot disagree.
#pragma once

#include <cstdint>

// NPUSIM_RING_ABI(NAME, value)
#define NPUSIM_RING_ABI(X)                                                                                    \
  X(RING_BASE, 0x20000) /* command rings, one per stream: a header, then the slots                    */      \
  X(RING_COUNT, 8)      /* rings (streams with a ring of their own; more streams share them)          */      \
  X(RING_SHIFT, 13)     /* log2 of the distance between two rings' headers: 8 KiB                      */     \
  X(RING_HEAD, 0)       /* header offset: commands the firmware has consumed (counter)                  */    \
  X(RING_TAIL, 8)       /* header offset: commands the host has written (counter)                       */    \
  X(RING_SLOTS, 64)     /* offset of slot 0 from the ring's header                                      */    \
  X(RING_CAPACITY, 64)  /* slots in a ring (a power of two)                                             */    \
  X(SLOT_SHIFT, 6)      /* log2 of the slot size: 64-byte slots                                         */    \
  X(SLOT_KIND, 0)       /* slot offsets                                                                 */    \
  X(SLOT_ARG0, 8)                                                                                             \
  X(SLOT_ARG1, 16)                                                                                            \
  X(SLOT_ARG2, 24)                                                                                            \
  X(SLOT_SEQUENCE, 32)                                                                                        \
  X(COMMAND_LAUNCH, 1)       /* arg0 program, arg1 argument block, arg2 core mask                          */ \
  X(COMMAND_COPY_H2D, 2)     /* arg0 device destination, arg1 host source, arg2 bytes                      */ \
  X(COMMAND_COPY_D2H, 3)     /* arg0 host destination, arg1 device source, arg2 bytes                      */ \
  X(COMMAND_COPY_D2D, 4)     /* arg0 device destination, arg1 device source, arg2 bytes                    */ \
  X(COMMAND_EVENT_RECORD, 5) /* arg0 event address, arg1 value: stores the value and the cycle            */  \
  X(COMMAND_EVENT_WAIT, 6)   /* arg0 event address, arg1 value: the ring waits until the event reaches it  */ \
  X(COMMAND_FENCE, 7)        /* completes once every command the firmware took before it has completed     */ \
  X(STATUS_UNKNOWN_COMMAND, 0xffff)                                                                           \
  X(STATUS_BAD_EVENT, 0xfffe) /* an event command whose address is outside the event table                 */ \
  X(COMPLETION_BASE, 0x30000) /* completion queue: a tail counter, then entries in completion order      */   \
  X(COMPLETION_TAIL, 0)       /* entries the firmware has written (counter)                               */  \
  X(COMPLETION_SUBMITTED, 8)  /* commands the host has written into all the rings (counter)               */  \
  X(COMPLETION_ENTRIES, 64)   /* offset of entry 0                                                        */  \
  X(COMPLETION_CAPACITY, 512) /* entries: RING_COUNT x RING_CAPACITY, so a run can never overflow it      */  \
  X(COMPLETION_SHIFT, 5)      /* log2 of the entry size: 32-byte entries                                  */  \
  X(ENTRY_SEQUENCE, 0)        /* entry offsets: the command's sequence number, its status (0, or 1 + the  */  \
  X(ENTRY_STATUS, 8)          /* first core that trapped), and the cycles when the firmware took it and   */  \
  X(ENTRY_START_CYCLE, 16)    /* when it completed                                                        */  \
  X(ENTRY_END_CYCLE, 24)                                                                                      \
  X(EVENT_BASE, 0x40000) /* events: 16 bytes each, the last recorded value and the cycle of recording */      \
  X(EVENT_COUNT, 4096)                                                                                        \
  X(EVENT_SHIFT, 4)                                                                                           \
  X(EVENT_VALUE, 0)                                                                                           \
  X(EVENT_CYCLE, 8)                                                                                           \
  X(FIRMWARE_BASE, 0x10000) /* where the firmware image is loaded and starts                              */  \
  X(HEAP_BASE, 0x100000)    /* first byte the device allocator hands out                                  */

namespace npusim::firmware {
#define NPUSIM_RING_ABI_CONSTANT(name, value) inline constexpr uint64_t name = value;
NPUSIM_RING_ABI(NPUSIM_RING_ABI_CONSTANT)
#undef NPUSIM_RING_ABI_CONSTANT

// One 64-byte command slot as the host writes it.
struct CommandSlot {
  uint64_t kind, arg0, arg1, arg2, sequence, reserved[3];
};
static_assert(sizeof(CommandSlot) == (1u << SLOT_SHIFT));

// One 32-byte completion entry as the firmware writes it.
struct CompletionEntry {
  uint64_t sequence, status, start_cycle, end_cycle;
};
static_assert(sizeof(CompletionEntry) == (1u << COMPLETION_SHIFT));
static_assert(COMPLETION_CAPACITY >= RING_COUNT * RING_CAPACITY);
static_assert(RING_SLOTS + RING_CAPACITY * sizeof(CommandSlot) <= (1u << RING_SHIFT));
static_assert(RING_BASE + (RING_COUNT << RING_SHIFT) <= COMPLETION_BASE);
static_assert(COMPLETION_BASE + COMPLETION_ENTRIES + (COMPLETION_CAPACITY << COMPLETION_SHIFT) <= EVENT_BASE);
static_assert(EVENT_BASE + (EVENT_COUNT << EVENT_SHIFT) <= HEAP_BASE);

// The assembled firmware image, embedded at build time.
const uint64_t* firmware_image();
uint64_t firmware_image_words();
}  // namespace npusim::firmware
