// Fuzz target for the command-processor firmware: the host side writes a batch of corrupt commands into the rings
// (unknown kinds, wild addresses and sizes, bad core masks, events that are never recorded, wrong sequence numbers)
// and rings the doorbell. The firmware must complete each command or fail cleanly (a CommandProcessorFault naming the
// command processor and its PC), never crash or hang, and the device must stay usable: a copy and a launch after the
// batch (after a reboot of the firmware where it failed, as the runtime reboots it) give the right result.
//
// Input: 32-byte records {ring, kind selector, flags, unused[5], arg0, arg1, arg2}. Flags bit k (k < 3) passes argk
// raw instead of shaped into a nearly valid value; bit 3 writes a wrong sequence number (arg2 with the top bit set,
// so that it names no other command); bit 4 rings the doorbell
// after this command. Host addresses are always shaped into the host staging buffer: the chip copies from and to the
// host addresses it is given, as a DMA engine does, so they are the runtime's to get right (docs/robustness.md).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "npusim/emulator/functional_chip.h"
#include "npusim/firmware/ring_abi.h"
#include "npusim/isa/assembler.h"
#include "npusim/sim/timed_chip.h"

namespace {

namespace abi = npusim::firmware;

constexpr uint64_t kPrograms = abi::HEAP_BASE;  // four kernels, 256 bytes apart
constexpr uint64_t kArguments = 0x180000;       // four argument blocks, 64 bytes apart
constexpr uint64_t kData = 0x200000;            // 64 KiB the commands copy to and from
constexpr uint64_t kCheck = 0x300000;           // the usability check's own words
constexpr size_t kHostBytes = 4096;
constexpr size_t kRecordBytes = 32;
constexpr size_t kMaxRecords = 256;
constexpr uint64_t kNotChecked = ~0ull;  // the kind noted for a command written with a wrong sequence number

// *arguments[0] += arguments[1] after arguments[2] spins; a trap on core 1; a barrier; a wait that never ends.
constexpr const char* kKernels[] = {
    "ld r2, 0(r1)\n ld r3, 8(r1)\n ld r4, 16(r1)\nspin: beq r4, r0, done\n addi r4, r4, -1\n jal r0, spin\n"
    "done: ld r5, 0(r2)\n add r5, r5, r3\n st r5, 0(r2)\n halt\n",
    "csrr r3, coreid\n beq r3, r0, ok\n ld r4, 3(r0)\nok: halt\n",
    "barrier\n halt\n",
    "sem.wait.dma 1\n halt\n",
};

struct Record {
  uint8_t ring, kind, flags, unused[5];
  uint64_t args[3];
};
static_assert(sizeof(Record) == kRecordBytes);

// Copies may not write below HEAP_BASE, over the rings, events and firmware: the firmware does not check a copy's
// destination (each check would cost every copy firmware cycles), so this is the runtime's to get right, as the host
// addresses are (docs/robustness.md).
uint64_t above_reserved(uint64_t device_address) {
  return device_address < abi::HEAP_BASE ? device_address + abi::HEAP_BASE : device_address;
}

uint64_t shaped_kind(uint8_t selector, uint64_t raw) {
  switch (selector % 12) {
    case 7: return 0;
    case 8: return abi::COMMAND_FENCE + 1;
    case 9: return abi::STATUS_UNKNOWN_COMMAND;
    case 10: return raw;
    case 11: return abi::COMMAND_LAUNCH;
    default: return abi::COMMAND_LAUNCH + selector % 12;  // the seven kinds
  }
}

class RingHarness {
 public:
  explicit RingHarness(npusim::emulator::Chip& chip) : chip_(chip) {}

  void reset() {
    npusim::emulator::DeviceMemory& memory = chip_.memory();
    memory.clear();
    memory.write(abi::FIRMWARE_BASE, abi::firmware_image(), abi::firmware_image_words() * sizeof(uint64_t));
    for (size_t k = 0; k < std::size(kKernels); ++k) {
      const std::vector<uint64_t> words = npusim::isa::assemble(kKernels[k], "kernel.s");
      memory.write(kPrograms + 256 * k, words.data(), words.size() * sizeof(uint64_t));
    }
    for (uint64_t block = 0; block < 4; ++block) {
      const uint64_t arguments[] = {kData + 8 * block, block + 1, block * 100};
      memory.write(kArguments + 64 * block, arguments, sizeof arguments);
    }
    reboot();
    chip_.take_launch_records();
  }

  // As the runtime does after a firmware fault: empty rings and completion queue, the firmware started again.
  void reboot() {
    npusim::emulator::DeviceMemory& memory = chip_.memory();
    memory.fill(abi::RING_BASE, 0, abi::RING_COUNT << abi::RING_SHIFT);
    memory.fill(abi::COMPLETION_BASE, 0, abi::COMPLETION_ENTRIES + (abi::COMPLETION_CAPACITY << abi::COMPLETION_SHIFT));
    submitted_ = seen_ = 0;
    chip_.boot(abi::FIRMWARE_BASE);
  }

  uint64_t word(uint64_t address) {
    uint64_t value = 0;
    chip_.memory().read(address, &value, sizeof value);
    return value;
  }
  void set_word(uint64_t address, uint64_t value) { chip_.memory().write(address, &value, sizeof value); }
  uint64_t ring_header(int ring) const { return abi::RING_BASE + (static_cast<uint64_t>(ring) << abi::RING_SHIFT); }
  bool ring_empty(int ring) {
    return word(ring_header(ring) + abi::RING_HEAD) == word(ring_header(ring) + abi::RING_TAIL);
  }

  // Appends a command unless its ring is full (the runtime never overfills a ring); returns its sequence or 0.
  uint64_t push(int ring, uint64_t kind, uint64_t arg0, uint64_t arg1, uint64_t arg2, uint64_t sequence = 0) {
    const uint64_t header = ring_header(ring);
    const uint64_t head = word(header + abi::RING_HEAD), tail = word(header + abi::RING_TAIL);
    if (tail - head >= abi::RING_CAPACITY) return 0;
    ++submitted_;
    const abi::CommandSlot slot{kind, arg0, arg1, arg2, sequence ? sequence : submitted_, {}};
    chip_.memory().write(header + abi::RING_SLOTS + (tail % abi::RING_CAPACITY) * sizeof slot, &slot, sizeof slot);
    set_word(header + abi::RING_TAIL, tail + 1);
    set_word(abi::COMPLETION_BASE + abi::COMPLETION_SUBMITTED, submitted_);
    return slot.sequence;
  }

  // Rings the doorbell; the firmware's fault message, or empty. New completion entries are appended to `entries`.
  std::string ring_doorbell(std::vector<abi::CompletionEntry>& entries) {
    std::string fault;
    try {
      chip_.ring_doorbell();
    } catch (const npusim::emulator::CommandProcessorFault& error) {
      fault = error.what();
    }
    const uint64_t tail = word(abi::COMPLETION_BASE + abi::COMPLETION_TAIL);
    for (; seen_ < tail; ++seen_) {
      abi::CompletionEntry entry;
      chip_.memory().read(abi::COMPLETION_BASE + abi::COMPLETION_ENTRIES +
                              ((seen_ % abi::COMPLETION_CAPACITY) << abi::COMPLETION_SHIFT),
                          &entry, sizeof entry);
      entries.push_back(entry);
    }
    return fault;
  }

  npusim::emulator::Chip& chip() { return chip_; }

 private:
  npusim::emulator::Chip& chip_;
  uint64_t submitted_ = 0, seen_ = 0;
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "fuzz: %s\n", why.c_str());
  std::abort();
}

void check_fault(const std::string& fault) {
  if (!fault.empty() && fault.find("command processor, pc 0x") == std::string::npos)
    fail("a firmware fault that does not name the command processor and its pc: " + fault);
}

// The device must still work: a host-to-device copy, a kernel that adds to the copied word, a copy back.
void check_usable(RingHarness& device, bool firmware_failed) {
  int ring = -1;
  for (int candidate = 0; candidate < static_cast<int>(abi::RING_COUNT) && !firmware_failed; ++candidate)
    if (device.ring_empty(candidate)) ring = candidate;
  if (ring < 0) {  // every ring waits for an event that will never come, or the firmware failed: start it again
    device.reboot();
    ring = 0;
  }
  // The batch may have copied over anything above HEAP_BASE, the kernels included: the check brings its own.
  const uint64_t value = 0x1234567, arguments[] = {kCheck, 5, 0};
  device.chip().memory().write(kCheck + 64, arguments, sizeof arguments);
  const std::vector<uint64_t> adder = npusim::isa::assemble(kKernels[0], "adder.s");
  device.chip().memory().write(kCheck + 256, adder.data(), adder.size() * sizeof(uint64_t));
  uint64_t back = 0;
  device.push(ring, abi::COMMAND_COPY_H2D, kCheck, reinterpret_cast<uint64_t>(&value), 8);
  device.push(ring, abi::COMMAND_LAUNCH, kCheck + 256, kCheck + 64, 1);
  device.push(ring, abi::COMMAND_COPY_D2H, reinterpret_cast<uint64_t>(&back), kCheck, 8);
  std::vector<abi::CompletionEntry> entries;
  const std::string fault = device.ring_doorbell(entries);
  if (!fault.empty()) fail("the firmware failed on valid commands after a corrupt batch: " + fault);
  if (back != value + 5)
    fail("the device is not usable after a corrupt batch: read back " + std::to_string(back) + ", expected " +
         std::to_string(value + 5));
}

void run_batch(RingHarness& device, const uint8_t* data, size_t size) {
  device.reset();
  std::vector<uint8_t> host(kHostBytes);
  for (size_t k = 0; k < host.size(); ++k) host[k] = static_cast<uint8_t>(k * 131 + 7);
  const uint64_t host_base = reinterpret_cast<uint64_t>(host.data());
  std::vector<abi::CompletionEntry> entries;
  std::vector<uint64_t> kinds(1, 0);  // by sequence number
  std::string fault;
  for (size_t offset = 0; offset + kRecordBytes <= size && offset / kRecordBytes < kMaxRecords && fault.empty();
       offset += kRecordBytes) {
    Record record;
    std::memcpy(&record, data + offset, sizeof record);
    const uint64_t kind = shaped_kind(record.kind, record.args[2]);
    uint64_t args[3];
    for (int k = 0; k < 3; ++k) args[k] = record.args[k];
    const bool raw0 = record.flags & 1, raw1 = record.flags & 2, raw2 = record.flags & 4;
    const auto host_range = [&](uint64_t& address, uint64_t& bytes) {  // always inside the host buffer
      const uint64_t start = address % kHostBytes;
      address = host_base + start;
      bytes %= kHostBytes - start + 1;
    };
    switch (kind) {
      case abi::COMMAND_LAUNCH:
        if (!raw0) args[0] = kPrograms + 256 * (args[0] % std::size(kKernels));
        if (!raw1) args[1] = kArguments + 64 * (args[1] % 4);
        if (!raw2) args[2] = 1 + args[2] % 3;
        break;
      case abi::COMMAND_COPY_H2D:
        if (!raw0) args[0] = kData + args[0] % 0x10000;
        args[0] = above_reserved(args[0]);
        host_range(args[1], args[2]);
        break;
      case abi::COMMAND_COPY_D2H:
        if (!raw1) args[1] = kData + args[1] % 0x10000;
        host_range(args[0], args[2]);
        break;
      case abi::COMMAND_COPY_D2D:
        if (!raw0) args[0] = kData + args[0] % 0x10000;
        args[0] = above_reserved(args[0]);
        if (!raw1) args[1] = kData + args[1] % 0x10000;
        if (!raw2) args[2] %= 0x2000;
        break;
      case abi::COMMAND_EVENT_RECORD:
      case abi::COMMAND_EVENT_WAIT:
        if (!raw0) args[0] = abi::EVENT_BASE + ((args[0] % 16) << abi::EVENT_SHIFT);
        if (!raw1) args[1] %= 4;
        break;
      default: break;
    }
    // A wrong sequence number never names another command of the batch: the top bit set.
    const bool wrong_sequence = record.flags & 8;
    const uint64_t sequence = device.push(record.ring % abi::RING_COUNT, kind, args[0], args[1], args[2],
                                          wrong_sequence ? args[2] | 1ull << 63 : 0);
    if (sequence) kinds.push_back(wrong_sequence ? kNotChecked : kind);
    if (record.flags & 16) fault = device.ring_doorbell(entries);
  }
  if (fault.empty()) fault = device.ring_doorbell(entries);
  check_fault(fault);
  for (const abi::CompletionEntry& entry : entries) {
    if (entry.sequence == 0 || entry.sequence >= kinds.size()) continue;  // a wrong sequence number we wrote
    const uint64_t kind = kinds[entry.sequence];
    if (kind == kNotChecked) continue;
    const bool known = kind >= abi::COMMAND_LAUNCH && kind <= abi::COMMAND_FENCE;
    const bool event = kind == abi::COMMAND_EVENT_RECORD || kind == abi::COMMAND_EVENT_WAIT;
    const bool fine = kind == abi::COMMAND_LAUNCH ? entry.status <= device.chip().config().chip_cores
                      : event                     ? entry.status == 0 || entry.status == abi::STATUS_BAD_EVENT
                      : known                     ? entry.status == 0
                                                  : entry.status == abi::STATUS_UNKNOWN_COMMAND;
    if (!fine)
      fail("command " + std::to_string(entry.sequence) + " of kind " + std::to_string(kind) +
           " completed with status " + std::to_string(entry.status));
  }
  check_usable(device, !fault.empty());
}

npusim::config::ChipConfig ring_fuzz_config() {
  npusim::config::ChipConfig config;
  config.chip_cores = 2;
  config.dram_capacity_mib = 64;
  config.runtime_watchdog_instructions = 20000;
  return config;
}

}  // namespace

// The same batch on both command processors: the emulator's and the timed model's (one SystemC design per process,
// built once and reset between inputs).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static npusim::emulator::FunctionalChip functional_chip(ring_fuzz_config());
  static std::unique_ptr<npusim::emulator::Chip> timed_chip =
      std::move(npusim::sim::make_timed_chips(ring_fuzz_config(), 1).front());
  static RingHarness functional(functional_chip), timed(*timed_chip);
  run_batch(functional, data, size);
  run_batch(timed, data, size);
  return 0;
}
