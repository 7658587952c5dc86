// Scalar integer arithmetic, logic and control/status registers.
#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;
int64_t as_signed(uint64_t value) { return static_cast<int64_t>(value); }
uint64_t imm(const Instruction& i) { return static_cast<uint64_t>(static_cast<int64_t>(i.imm)); }
}  // namespace

void Add(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) + c.reg(i.rs2)); }
void Sub(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) - c.reg(i.rs2)); }
void Mul(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) * c.reg(i.rs2)); }
void And(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) & c.reg(i.rs2)); }
void Or(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) | c.reg(i.rs2)); }
void Xor(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) ^ c.reg(i.rs2)); }
void Sll(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) << (c.reg(i.rs2) & 63)); }
void Srl(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) >> (c.reg(i.rs2) & 63)); }
void Sra(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, as_signed(c.reg(i.rs1)) >> (c.reg(i.rs2) & 63)); }
void Slt(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, as_signed(c.reg(i.rs1)) < as_signed(c.reg(i.rs2))); }
void Sltu(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) < c.reg(i.rs2)); }
// Division traps on a zero divisor; the one overflowing quotient, INT64_MIN / -1, wraps to INT64_MIN (remainder 0).
namespace {
void check_divisor(uint64_t divisor) {
  if (divisor == 0) throw Trap("integer division by zero");
}
bool overflows(int64_t dividend, int64_t divisor) { return dividend == INT64_MIN && divisor == -1; }
}  // namespace
void Div(ExecContext& c, const Instruction& i) {
  const int64_t a = as_signed(c.reg(i.rs1)), b = as_signed(c.reg(i.rs2));
  check_divisor(b);
  c.set_reg(i.rd, static_cast<uint64_t>(overflows(a, b) ? a : a / b));
}
void Divu(ExecContext& c, const Instruction& i) {
  check_divisor(c.reg(i.rs2));
  c.set_reg(i.rd, c.reg(i.rs1) / c.reg(i.rs2));
}
void Rem(ExecContext& c, const Instruction& i) {
  const int64_t a = as_signed(c.reg(i.rs1)), b = as_signed(c.reg(i.rs2));
  check_divisor(b);
  c.set_reg(i.rd, static_cast<uint64_t>(overflows(a, b) ? 0 : a % b));
}
void Remu(ExecContext& c, const Instruction& i) {
  check_divisor(c.reg(i.rs2));
  c.set_reg(i.rd, c.reg(i.rs1) % c.reg(i.rs2));
}
void Addi(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) + imm(i)); }
void Andi(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) & imm(i)); }
void Ori(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) | imm(i)); }
void Xori(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) ^ imm(i)); }
void Slli(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) << (i.imm & 63)); }
void Srli(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.reg(i.rs1) >> (i.imm & 63)); }
void Srai(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, as_signed(c.reg(i.rs1)) >> (i.imm & 63)); }
void Slti(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, as_signed(c.reg(i.rs1)) < i.imm); }
void Li(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, imm(i)); }
void La(ExecContext& c, const Instruction& i) {
  c.set_reg(i.rd, c.pc + static_cast<uint64_t>(static_cast<int64_t>(i.imm) * isa::kInstructionBytes));
}
void Lhi(ExecContext& c, const Instruction& i) {
  c.set_reg(i.rd, (static_cast<uint64_t>(static_cast<uint32_t>(i.imm)) << 32) | (c.reg(i.rd) & 0xffffffffu));
}
void Csrr(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.read_csr(static_cast<isa::Csr>(i.imm))); }

}  // namespace npusim::emulator::semantics
