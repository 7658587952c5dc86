// Constant materialisation for the assembly writer.
#include "npusim/emitter/assembly_writer.h"

namespace npusim::emitter {
namespace {
bool fits_immediate(int64_t value) { return value >= INT32_MIN && value <= INT32_MAX; }
}  // namespace

void AssemblyWriter::load_constant(int reg, int64_t value) {
  line("li r{}, {}", reg, static_cast<int32_t>(static_cast<uint32_t>(value)));
  if (!fits_immediate(value)) line("lhi r{}, {}", reg, static_cast<int32_t>(static_cast<uint64_t>(value) >> 32));
}

void AssemblyWriter::add_constant(int reg, int64_t value, int scratch) {
  if (value == 0) return;
  if (fits_immediate(value)) {
    line("addi r{0}, r{0}, {1}", reg, value);
    return;
  }
  load_constant(scratch, value);
  line("add r{0}, r{0}, r{1}", reg, scratch);
}

}  // namespace npusim::emitter
