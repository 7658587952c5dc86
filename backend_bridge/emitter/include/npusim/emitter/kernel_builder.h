// The kernel builder: kernels are built as typed ISA instructions, never as assembly text. It gives
//   - registers by allocation (Reg handles hold one until they go out of scope; a kernel needing more than exist
//     fails to build, naming the kernel and what the registers were for),
//   - labels as objects (no name can collide when a piece is used twice),
//   - scratchpad and accumulator tiles from an allocator (a tile that does not fit fails to build, naming it),
//   - engine ordering derived from which engine reads and writes which tile (kernel_builder.md in docs/ explains the
//     rules): a vector instruction reading a tile that a DMA load wrote gets a semaphore pair before it, placed by
//     the builder, not by hand;
//   - one method per instruction of the ISA table, generated from instructions.def.
// Assembly text exists only for people: Kernel::assembly() disassembles the built words.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/isa/isa.h"

namespace npusim::emitter {

// A built kernel: its name (profiles show it), its program image, and the cores it shares its work among.
struct Kernel {
  std::string name;
  std::vector<uint64_t> words;
  int64_t cores = 1;  // launch it on cores 0 .. cores-1: the program shares its work among exactly these
  std::string description;
  std::string assembly() const;  // for NPUSIM_DUMP_KERNELS and people: the description, then the disassembly
};

// A kernel that cannot be built (too many live registers, a tile that does not fit, an operand of the wrong kind).
// The message names the kernel and the reason.
class BuildError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// The emitter cannot express this case (too many dimensions after collapsing, a stride beyond the immediate field);
// the caller takes another route.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class KernelBuilder;

// A register operand: a number, as the instruction fields hold it. Reg handles convert to it.
struct R {
  uint8_t number;
};
inline constexpr R kZero{0};           // r0 reads zero
inline constexpr R kArgumentBlock{1};  // r1 holds the argument block's address at kernel start

// An allocated register, held until the handle is destroyed (or moved from).
class Reg {
 public:
  Reg() = default;
  Reg(Reg&& other) noexcept : builder_(other.builder_), number_(other.number_) { other.builder_ = nullptr; }
  Reg& operator=(Reg&& other) noexcept;
  Reg(const Reg&) = delete;
  Reg& operator=(const Reg&) = delete;
  ~Reg();
  operator R() const;  // NOLINT(google-explicit-constructor): a Reg is used wherever a register operand is
  int number() const { return number_; }

 private:
  friend class KernelBuilder;
  Reg(KernelBuilder* builder, int number) : builder_(builder), number_(number) {}
  KernelBuilder* builder_ = nullptr;
  int number_ = 0;
};

struct Label {
  int id = -1;
};

enum class Space : uint8_t { Scratchpad, Accumulator };

// A region of this core's scratchpad or accumulator. `ordered` tiles have their engine order derived by the builder;
// a kernel that pipelines a tile across loop iterations with its own semaphores (matmul's K-step slots) allocates it
// unordered and orders it by hand.
struct Tile {
  int id = -1;
  Space space = Space::Scratchpad;
  int64_t address = 0;
  int64_t bytes = 0;
};

// The engines with instruction queues (the scalar unit issues to them in program order).
enum class Engine : uint8_t { Dma, Vector, Matrix };
inline constexpr int kQueueEngines = 3;

// One operand of an instruction method: a register, an immediate, a label, an element type or a CSR.
struct Operand {
  enum class Kind : uint8_t { Register, Immediate, Label, Type, Csr } kind;
  int64_t value;
  Operand(R r) : kind(Kind::Register), value(r.number) {}             // NOLINT
  Operand(const Reg& r) : kind(Kind::Register), value(r.number()) {}  // NOLINT
  template <std::integral T>
  Operand(T imm) : kind(Kind::Immediate), value(static_cast<int64_t>(imm)) {}              // NOLINT
  Operand(Label label) : kind(Kind::Label), value(label.id) {}                             // NOLINT
  Operand(isa::ElementType type) : kind(Kind::Type), value(static_cast<int64_t>(type)) {}  // NOLINT
  Operand(isa::Csr csr) : kind(Kind::Csr), value(static_cast<int64_t>(csr)) {}             // NOLINT
};

class KernelBuilder {
 public:
  KernelBuilder(std::string name, const config::ChipConfig& config);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  const std::string& name() const { return name_; }
  const config::ChipConfig& config() const { return config_; }
  // Printed at the head of the kernel's assembly (a line each).
  void describe(const std::string& text);

  // ---- registers
  // `purpose` names the register in the error raised when none is free.
  Reg reg(std::string_view purpose);

  // ---- labels
  Label label();
  void bind(Label label);  // the next instruction is the label's target
  // A label on 64-bit words placed after the program's instructions (read with La + Ld).
  Label data(std::span<const uint64_t> words);

  // ---- tiles
  Tile tile(Space space, int64_t bytes, std::string_view name, bool ordered = true);
  int64_t free_bytes(Space space) const;
  // Loads the tile's address (plus `offset` bytes) into `reg` and binds the register to the tile.
  void point(R reg, const Tile& tile, int64_t offset = 0);
  // Binds `reg` to `tile` without changing it: the kernel computed an address within the tile into it. A register's
  // binding says which tile its memory operands touch; it holds until the register is bound again or released.
  void bind(R reg, const Tile& tile);
  // A semaphore of the kernel's own, for tiles it orders by hand.
  int semaphore();

  // ---- constants
  void li(R reg, int64_t value);            // any 64-bit value
  void add_constant(R reg, int64_t value);  // reg += value, any 64-bit value
  void mul_constant(R reg, int64_t value);  // reg *= value
  void move(R destination, R source) { Addi(destination, source, 0); }

  // ---- instructions, one method each, generated from the ISA table. Operands follow the assembly order; a typed
  // instruction takes its element type first (a conversion its destination type, then its source type), a memory
  // operand imm(rs1) is two operands (rs1, imm), a branch target is a Label.
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operand_letters, timing, types, doc) \
  template <typename... Operands>                                                     \
  void Name(Operands&&... values) {                                                   \
    emit(isa::Opcode::Name, {Operand(std::forward<Operands>(values))...});            \
  }
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION

  void emit(isa::Opcode opcode, std::vector<Operand> operands);

  // Waits until every engine has finished what it was given (a fence), e.g. before DRAM written by DMA is read.
  void fence() { Fence(); }

  // The program: labels resolved, data appended. The builder is spent afterwards.
  Kernel finish(int64_t cores);

 private:
  friend class Reg;
  struct Ordering;
  void release(int number);
  // `to` waits for everything queued on `from`: a semaphore post on `from` and a wait on `to`.
  std::array<isa::Instruction, 2> sync_pair(Engine from, Engine to);
  void emit_sync(Engine from, Engine to);
  void insert_sync(Engine from, Engine to, size_t at);
  [[noreturn]] void fail(const std::string& reason) const;
  void track(const isa::Instruction& instruction);

  std::string name_;
  config::ChipConfig config_;
  std::string description_;
  std::vector<isa::Instruction> instructions_;
  std::vector<std::string> register_purpose_;  // per physical register; empty when free
  std::vector<int> register_tile_;             // per physical register: the tile its address points into, or -1
  std::vector<Tile> tiles_;
  std::vector<std::string> tile_names_;
  std::vector<bool> tile_ordered_;
  int64_t next_address_[2] = {0, 0};
  struct Fixup {
    size_t instruction;
    int label;
  };
  std::vector<Fixup> fixups_;
  std::vector<int64_t> label_position_;  // instruction index, or -1 while unbound; data labels are after the text
  std::vector<int64_t> label_data_offset_;
  std::vector<uint64_t> data_;
  int next_semaphore_ = 0;
  std::unique_ptr<Ordering> ordering_;
};

}  // namespace npusim::emitter
