// Reading a fuzz input as a kernel with buffers, running it through the firmware, and checking how it ended.
#include "fuzz_program.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>

#include "npusim/firmware/ring_abi.h"
#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"

namespace npusim::fuzz {
namespace abi = firmware;

namespace {

// Device memory the runs use, above the firmware's reserved region.
constexpr uint64_t kProgram = abi::HEAP_BASE;
constexpr uint64_t kMaxProgramWords = 512;
constexpr uint64_t kArguments = 0x180000;
constexpr uint64_t kBuffers = 0x200000;
constexpr uint64_t kBufferBytes = 4096;
constexpr int kBufferCount = 4;

uint64_t core_mask_from(int selector) { return selector == 1 ? 0b10 : selector >= 2 ? 0b11 : 0b01; }

uint64_t hash_bytes(const uint8_t* data, size_t size) {  // FNV-1a
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < size; ++k) hash = (hash ^ data[k]) * 0x100000001b3ull;
  return hash;
}

// Buffer 0 random bytes, 1 fp32 values in [-4, 4], 2 int64 indices in [0, 64), 3 zeros (an output).
std::vector<uint8_t> make_buffers(uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<uint8_t> buffers(kBufferCount * kBufferBytes, 0);
  for (uint64_t k = 0; k < kBufferBytes; ++k) buffers[k] = static_cast<uint8_t>(random());
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  for (uint64_t k = 0; k < kBufferBytes / 4; ++k) {
    const float number = value(random);
    std::memcpy(&buffers[kBufferBytes + 4 * k], &number, 4);
  }
  for (uint64_t k = 0; k < kBufferBytes / 8; ++k) {
    const uint64_t index = random() % 64;
    std::memcpy(&buffers[2 * kBufferBytes + 8 * k], &index, 8);
  }
  return buffers;
}

}  // namespace

std::optional<FuzzProgram> read_program(const uint8_t* data, size_t size) {
  FuzzProgram program;
  program.buffer_seed = hash_bytes(data, size);
  if (size >= 2 && data[0] == '#') {
    program.core_mask = core_mask_from(data[1] - '1');
    try {
      program.words =
          isa::assemble(std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2), "fuzz_program.s");
    } catch (const isa::AssemblyError&) {
      return std::nullopt;
    }
  } else {
    if (size < 8) return std::nullopt;
    program.core_mask = core_mask_from(data[0] & 3);
    for (size_t offset = 8; offset + 8 <= size; offset += 8) {
      uint64_t word = 0;
      std::memcpy(&word, data + offset, 8);
      program.words.push_back(word);
    }
  }
  if (program.words.empty() || program.words.size() > kMaxProgramWords) return std::nullopt;
  return program;
}

config::ChipConfig fuzz_chip_config() {
  config::ChipConfig config;
  config.chip_cores = 2;
  config.dram_capacity_mib = 64;
  config.core_scratchpad_kib = 64;
  config.core_accumulator_kib = 16;
  config.runtime_watchdog_instructions = 20000;
  return config;
}

Outcome ProgramRunner::run(const FuzzProgram& program) {
  emulator::DeviceMemory& memory = chip_.memory();
  memory.clear();
  chip_.clear_core_memories();
  memory.write(abi::FIRMWARE_BASE, abi::firmware_image(), abi::firmware_image_words() * sizeof(uint64_t));
  chip_.protect_below(abi::HEAP_BASE);  // as the runtime boots it
  chip_.boot(abi::FIRMWARE_BASE);
  chip_.take_launch_records();

  memory.write(kProgram, program.words.data(), program.words.size() * sizeof(uint64_t));
  const std::vector<uint8_t> buffers = make_buffers(program.buffer_seed);
  memory.write(kBuffers, buffers.data(), buffers.size());
  const uint64_t arguments[] = {
      kBuffers,         kBuffers + kBufferBytes, kBuffers + 2 * kBufferBytes, kBuffers + 3 * kBufferBytes,
      kBufferBytes / 4, program.buffer_seed};
  memory.write(kArguments, arguments, sizeof arguments);

  // One launch command in ring 0, as the runtime writes it.
  const abi::CommandSlot slot{abi::COMMAND_LAUNCH, kProgram, kArguments, program.core_mask, 1, {}};
  const uint64_t one = 1;
  memory.write(abi::RING_BASE + abi::RING_SLOTS, &slot, sizeof slot);
  memory.write(abi::RING_BASE + abi::RING_TAIL, &one, sizeof one);
  memory.write(abi::COMPLETION_BASE + abi::COMPLETION_SUBMITTED, &one, sizeof one);

  Outcome outcome;
  try {
    chip_.ring_doorbell();
  } catch (const emulator::CommandProcessorFault& fault) {
    outcome.firmware_fault = fault.what();
  }
  for (emulator::LaunchRecord& launch : chip_.take_launch_records()) {
    outcome.fault = std::move(launch.fault);
    outcome.hazard = launch.first_hazard;
  }
  outcome.buffers.resize(buffers.size());
  memory.read(kBuffers, outcome.buffers.data(), outcome.buffers.size());
  for (int core = 0; core < chip_.config().chip_cores; ++core) outcome.registers.push_back(chip_.core_registers(core));
  return outcome;
}

void print_program(const FuzzProgram& program) {
  std::fprintf(stderr, "core mask 0b%llx, buffer seed 0x%llx, program:\n",
               static_cast<unsigned long long>(program.core_mask),
               static_cast<unsigned long long>(program.buffer_seed));
  for (size_t k = 0; k < program.words.size(); ++k) {
    std::string text;
    try {
      text = isa::disassemble(isa::decode(program.words[k]), kProgram + 8 * k);
    } catch (const isa::IllegalInstruction&) {
      text = "(illegal)";
    }
    std::fprintf(stderr, "  0x%llx: %016llx  %s\n", static_cast<unsigned long long>(kProgram + 8 * k),
                 static_cast<unsigned long long>(program.words[k]), text.c_str());
  }
}

void check_outcome(const FuzzProgram& program, const Outcome& outcome, const char* chip_name) {
  const auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "fuzz (%s): %s\n", chip_name, why.c_str());
    print_program(program);
    std::abort();
  };
  if (outcome.firmware_fault && outcome.firmware_fault->find("command processor, pc 0x") == std::string::npos)
    fail("a firmware fault that does not name the command processor and its pc: " + *outcome.firmware_fault);
  if (!outcome.fault) return;
  const emulator::KernelFault& fault = *outcome.fault;
  if (fault.core < 0 || !(program.core_mask >> fault.core & 1))
    fail("a kernel fault on a core the kernel was not launched on: " + fault.describe());
  if (fault.instruction.empty() || fault.cause.empty())
    fail("a kernel fault without its instruction or cause: " + fault.describe());
}

}  // namespace npusim::fuzz
