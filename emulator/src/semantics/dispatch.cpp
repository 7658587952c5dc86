// Instruction dispatch, generated from the table, plus fetch and the ExecContext defaults.
#include <fmt/format.h>

#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"
#include "npusim/isa/encoding.h"

namespace npusim::emulator {

void execute(ExecContext& context, const isa::Instruction& instruction) {
  context.next_pc = context.pc + isa::kInstructionBytes;
  switch (instruction.opcode) {
    // Division and special functions cost more energy per element than other vector work: counted apart.
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, types, doc)   \
  case isa::Opcode::Name:                                                        \
    if constexpr (isa::TimingClass::timing == isa::TimingClass::VectorSpecial) { \
      KernelStats& stats = context.stats();                                      \
      const uint64_t before = stats.vector_elements;                             \
      semantics::Name(context, instruction);                                     \
      stats.vector_special_elements += stats.vector_elements - before;           \
    } else {                                                                     \
      semantics::Name(context, instruction);                                     \
    }                                                                            \
    break;
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION
  }
}

void check_pc_alignment(uint64_t pc) {
  if (pc % isa::kInstructionBytes != 0) throw Trap(fmt::format("misaligned pc 0x{:x}", pc));
}

isa::Instruction decode_word(uint64_t word) {
  try {
    return isa::decode(word);
  } catch (const isa::IllegalInstruction& error) {
    throw Trap(fmt::format("illegal instruction: {}", error.what()));
  }
}

isa::Instruction fetch(ExecContext& context) {
  check_pc_alignment(context.pc);
  return decode_word(context.fetch_word(context.pc));
}

const DecodedInstruction& ExecContext::fetch_decoded() {
  const isa::Instruction instruction = fetch(*this);
  last_fetched_ = {instruction, isa::info(instruction.opcode).timing};
  return last_fetched_;
}

namespace {
std::span<std::byte> buffer_range(std::span<std::byte> memory, const char* name, uint64_t address, uint64_t count,
                                  uint64_t element_bytes) {
  if (address > memory.size() || count > (memory.size() - address) / element_bytes)
    throw Trap(fmt::format("{} access of {} x {} bytes at 0x{:x} is outside the {} KiB {}", name, count, element_bytes,
                           address, memory.size() / 1024, name));
  return memory.subspan(address, count * element_bytes);
}
}  // namespace

std::span<std::byte> ExecContext::scratchpad(uint64_t address, uint64_t count, uint64_t element_bytes) {
  return buffer_range(scratchpad_memory(), "scratchpad", address, count, element_bytes);
}

std::span<std::byte> ExecContext::accumulator(uint64_t address, uint64_t count, uint64_t element_bytes) {
  return buffer_range(accumulator_memory(), "accumulator", address, count, element_bytes);
}

// Rows of no bytes move nothing, however many: their count is not bounded by a buffer (a fuzzed kernel's came from an
// address, 2^28 rows of nothing per instruction).
void ExecContext::read_dram_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows,
                                 void* destination) {
  if (row_bytes == 0) return;
  auto* out = static_cast<std::byte*>(destination);
  for (uint64_t r = 0; r < rows; ++r) read_dram(address + r * stride, out + r * row_bytes, row_bytes);
}
void ExecContext::write_dram_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows,
                                  const void* source) {
  if (row_bytes == 0) return;
  for (uint64_t r = 0; r < rows; ++r) check_dram_store(address + r * stride, row_bytes);
  const auto* in = static_cast<const std::byte*>(source);
  for (uint64_t r = 0; r < rows; ++r) write_dram(address + r * stride, in + r * row_bytes, row_bytes);
}

MatrixWeights& ExecContext::matrix_weights() { throw Trap("the command processor has no matrix engine"); }
DmaShape& ExecContext::dma_shape() { throw Trap("the command processor has no DMA engine"); }
std::span<std::byte> ExecContext::peer_scratchpad(uint64_t) { throw Trap("the command processor has no scratchpad"); }
void ExecContext::semaphore_post(int) { throw Trap("the command processor has no engine semaphores"); }
void ExecContext::semaphore_wait(int) { throw Trap("the command processor has no engine semaphores"); }
void ExecContext::barrier() { throw Trap("the command processor takes part in no core barrier"); }

namespace {
void check_semaphore(int semaphore) {
  if (semaphore < 0 || semaphore >= kSemaphoreCount)
    throw Trap(fmt::format("semaphore {} does not exist (0..{})", semaphore, kSemaphoreCount - 1));
}
}  // namespace

void SemaphoreLedger::post(int semaphore) {
  check_semaphore(semaphore);
  ++posts_[semaphore];
}

uint64_t SemaphoreLedger::wait(int semaphore) {
  check_semaphore(semaphore);
  const uint64_t ticket = waits_[semaphore] + 1;
  if (ticket > posts_[semaphore])
    throw Trap(
        fmt::format("deadlock: this wait on semaphore {} can never complete: it needs post number {} and no "
                    "earlier instruction posts it",
                    semaphore, ticket));
  waits_[semaphore] = ticket;
  return ticket;
}

namespace {
[[noreturn]] void not_on_npu_core(const char* what) {
  throw Trap(fmt::format("{} is a command-processor instruction; NPU cores cannot execute it", what));
}
}  // namespace

void ExecContext::wait_for_doorbell() { not_on_npu_core("wfd"); }
void ExecContext::launch_cores(uint64_t, uint64_t, uint64_t) { not_on_npu_core("launch"); }
uint64_t ExecContext::wait_cores() { not_on_npu_core("wait"); }
void ExecContext::copy_host_to_device(uint64_t, uint64_t, uint64_t) { not_on_npu_core("copy.h2d"); }
void ExecContext::copy_device_to_host(uint64_t, uint64_t, uint64_t) { not_on_npu_core("copy.d2h"); }
void ExecContext::copy_device_to_device(uint64_t, uint64_t, uint64_t) { not_on_npu_core("copy.d2d"); }

}  // namespace npusim::emulator
