// The kernel builder: operand checking, register and tile allocation, labels, and the engine ordering it derives.
#include "npusim/emitter/kernel_builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

#include "engine_ordering.h"
#include "instruction_effects.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"

namespace npusim::emitter {

struct KernelBuilder::Ordering {
  EngineOrdering tracker;
  std::vector<std::vector<EngineOrdering::State>> incoming;  // per label: states at branches to it
  std::vector<size_t> loop_log_position;                     // per bound label: the tracker's log position there
  int semaphore[kQueueEngines][kQueueEngines];               // per (from, to) pair, or -1 until first used
  // The kernel's own semaphores count up from 0, the derived syncs' down from 15; they must not meet.
  int semaphores_used() const {
    int used = 0;
    for (const auto& row : semaphore)
      for (int id : row) used += id >= 0;
    return used;
  }
};

namespace {

constexpr int kFirstAllocatable = 2;  // r0 reads zero, r1 holds the argument block
constexpr int kSemaphores = 16;

bool fits_immediate(int64_t value) { return value >= INT32_MIN && value <= INT32_MAX; }

isa::Opcode post_on(Engine engine) {
  switch (engine) {
    case Engine::Dma: return isa::Opcode::SemPostDma;
    case Engine::Vector: return isa::Opcode::SemPostVector;
    case Engine::Matrix: return isa::Opcode::SemPostMatrix;
  }
  return isa::Opcode::SemPostDma;
}
isa::Opcode wait_on(Engine engine) {
  switch (engine) {
    case Engine::Dma: return isa::Opcode::SemWaitDma;
    case Engine::Vector: return isa::Opcode::SemWaitVector;
    case Engine::Matrix: return isa::Opcode::SemWaitMatrix;
  }
  return isa::Opcode::SemWaitDma;
}

uint8_t field_value(const isa::Instruction& instruction, Field field) {
  switch (field) {
    case Field::Rd: return instruction.rd;
    case Field::Rs1: return instruction.rs1;
    case Field::Rs2: return instruction.rs2;
    case Field::Rs3: return instruction.rs3;
  }
  return 0;
}

// Whether the instruction writes its rd register (scalar results, loads, links, CSR reads).
bool writes_register(const isa::Instruction& instruction) {
  const isa::InstructionInfo& row = isa::info(instruction.opcode);
  if (row.operands.empty() || row.operands[0] != 'd') return false;
  return row.timing == isa::TimingClass::Scalar || row.timing == isa::TimingClass::ScalarMemory ||
         row.timing == isa::TimingClass::Branch || instruction.opcode == isa::Opcode::Wait;
}

}  // namespace

std::string Kernel::assembly() const {
  std::string text = fmt::format("; {} (cores {})\n", name, cores);
  size_t start = 0;
  while (start < description.size()) {
    const size_t end = std::min(description.find('\n', start), description.size());
    text += fmt::format("; {}\n", description.substr(start, end - start));
    start = end + 1;
  }
  return text + isa::disassemble_program(words);
}

Reg& Reg::operator=(Reg&& other) noexcept {
  if (this != &other) {
    if (builder_) builder_->release(number_);
    builder_ = other.builder_;
    number_ = other.number_;
    other.builder_ = nullptr;
  }
  return *this;
}
Reg::~Reg() {
  if (builder_) builder_->release(number_);
}
Reg::operator R() const {
  if (!builder_) throw BuildError("a register handle that holds no register was used");
  return R{static_cast<uint8_t>(number_)};
}

KernelBuilder::KernelBuilder(std::string name, const config::ChipConfig& config)
    : name_(std::move(name)),
      config_(config),
      register_purpose_(isa::kRegisterCount),
      register_tile_(isa::kRegisterCount, -1),
      ordering_(std::make_unique<Ordering>()) {
  for (auto& row : ordering_->semaphore) std::fill(std::begin(row), std::end(row), -1);
}
KernelBuilder::~KernelBuilder() = default;

void KernelBuilder::fail(const std::string& reason) const {
  throw BuildError(fmt::format("kernel {}: {}", name_, reason));
}

void KernelBuilder::describe(const std::string& text) {
  if (!description_.empty()) description_ += '\n';
  description_ += text;
}

Reg KernelBuilder::reg(std::string_view purpose) {
  for (int number = kFirstAllocatable; number < isa::kRegisterCount; ++number)
    if (register_purpose_[number].empty()) {
      register_purpose_[number] = purpose.empty() ? "unnamed" : std::string(purpose);
      register_tile_[number] = -1;
      return Reg(this, number);
    }
  std::vector<std::string> live(register_purpose_.begin() + kFirstAllocatable, register_purpose_.end());
  fail(fmt::format("needs a register for '{}' while all {} are live ({})", purpose,
                   isa::kRegisterCount - kFirstAllocatable, fmt::join(live, ", ")));
}

void KernelBuilder::release(int number) {
  register_purpose_[number].clear();
  register_tile_[number] = -1;
}

Label KernelBuilder::label() {
  label_position_.push_back(-1);
  label_data_offset_.push_back(-1);
  ordering_->incoming.emplace_back();
  ordering_->loop_log_position.push_back(0);
  return Label{static_cast<int>(label_position_.size()) - 1};
}

void KernelBuilder::bind(Label label) {
  if (label.id < 0 || label.id >= static_cast<int>(label_position_.size())) fail("binds a label it did not make");
  if (label_position_[label.id] >= 0 || label_data_offset_[label.id] >= 0) fail("binds a label twice");
  // Code after an unconditional jump or a halt is reached only through its labels: this one, and any bound here
  // before it, whose paths the state already holds.
  const auto here = static_cast<int64_t>(instructions_.size());
  const bool another_label_here =
      std::find(label_position_.begin(), label_position_.end(), here) != label_position_.end();
  label_position_[label.id] = here;
  bool falls_through = true;
  if (!instructions_.empty() && !another_label_here) {
    const isa::Instruction& last = instructions_.back();
    falls_through = !(last.opcode == isa::Opcode::Halt || (last.opcode == isa::Opcode::Jal && last.rd == 0));
  }
  ordering_->tracker.join(ordering_->incoming[label.id], falls_through);
  ordering_->incoming[label.id].clear();
  ordering_->loop_log_position[label.id] = ordering_->tracker.log_position();
}

Label KernelBuilder::data(std::span<const uint64_t> words) {
  const Label result = label();
  label_data_offset_[result.id] = static_cast<int64_t>(data_.size());
  data_.insert(data_.end(), words.begin(), words.end());
  return result;
}

Tile KernelBuilder::tile(Space space, int64_t bytes, std::string_view name, bool ordered) {
  const int index = static_cast<int>(space);
  const int64_t capacity =
      static_cast<int64_t>(space == Space::Scratchpad ? config_.scratchpad_bytes() : config_.accumulator_bytes());
  const int64_t aligned = (bytes + 63) / 64 * 64;  // tiles start on 64-byte boundaries, as the banks are laid out
  if (bytes <= 0 || next_address_[index] + bytes > capacity)
    fail(fmt::format("tile '{}' of {} bytes does not fit the {} ({} of {} bytes free)", name, bytes,
                     space == Space::Scratchpad ? "scratchpad" : "accumulator", capacity - next_address_[index],
                     capacity));
  Tile tile{static_cast<int>(tiles_.size()), space, next_address_[index], bytes};
  next_address_[index] += std::min(aligned, capacity - next_address_[index]);
  tiles_.push_back(tile);
  tile_names_.emplace_back(name);
  tile_ordered_.push_back(ordered);
  return tile;
}

int64_t KernelBuilder::free_bytes(Space space) const {
  const int64_t capacity =
      static_cast<int64_t>(space == Space::Scratchpad ? config_.scratchpad_bytes() : config_.accumulator_bytes());
  return capacity - next_address_[static_cast<int>(space)];
}

void KernelBuilder::point(R reg, const Tile& tile, int64_t offset) {
  li(reg, tile.address + offset);
  bind(reg, tile);
}

void KernelBuilder::bind(R reg, const Tile& tile) {
  if (reg.number < kFirstAllocatable) fail(fmt::format("binds r{} to tile '{}'", reg.number, tile_names_[tile.id]));
  register_tile_[reg.number] = tile.id;
}

int KernelBuilder::semaphore() {
  if (next_semaphore_ + ordering_->semaphores_used() >= kSemaphores) fail("needs more than 16 semaphores");
  return next_semaphore_++;
}

void KernelBuilder::li(R reg, int64_t value) {
  Li(reg, static_cast<int32_t>(static_cast<uint32_t>(value)));
  if (!fits_immediate(value)) Lhi(reg, static_cast<int32_t>(static_cast<uint64_t>(value) >> 32));
}

void KernelBuilder::add_constant(R reg, int64_t value) {
  if (value == 0) return;
  if (fits_immediate(value)) {
    Addi(reg, reg, value);
    return;
  }
  Reg scratch = this->reg("add_constant");
  li(scratch, value);
  Add(reg, reg, scratch);
}

void KernelBuilder::mul_constant(R reg, int64_t value) {
  if (value == 1) return;
  Reg scratch = this->reg("mul_constant");
  li(scratch, value);
  Mul(reg, reg, scratch);
}

void KernelBuilder::emit(isa::Opcode opcode, std::vector<Operand> operands) {
  const isa::InstructionInfo& row = isa::info(opcode);
  isa::Instruction instruction;
  instruction.opcode = opcode;
  size_t next = 0;
  const auto take = [&](Operand::Kind kind, const char* what) -> int64_t {
    if (next >= operands.size() || operands[next].kind != kind)
      fail(fmt::format("{} takes {} as operand {}", isa::full_mnemonic(instruction), what, next + 1));
    return operands[next++].value;
  };
  if (row.typed()) {
    instruction.type = static_cast<isa::ElementType>(take(Operand::Kind::Type, "an element type"));
    if (row.types == isa::TypeForm::Conversion) instruction.imm = take(Operand::Kind::Type, "a source element type");
    if (!(isa::allowed_types(row.types) & isa::type_bit(instruction.type)))
      fail(fmt::format("{} does not take {}", row.mnemonic, isa::type_name(instruction.type)));
  }
  int label = -1;
  const auto immediate = [&](int64_t value) {
    if (!fits_immediate(value))
      fail(fmt::format("{}: immediate {} does not fit 32 bits", isa::full_mnemonic(instruction), value));
    instruction.imm = static_cast<int32_t>(value);
  };
  for (char letter : row.operands) {
    switch (letter) {
      case 'd': instruction.rd = static_cast<uint8_t>(take(Operand::Kind::Register, "a register")); break;
      case 's': instruction.rs1 = static_cast<uint8_t>(take(Operand::Kind::Register, "a register")); break;
      case 't': instruction.rs2 = static_cast<uint8_t>(take(Operand::Kind::Register, "a register")); break;
      case 'u': instruction.rs3 = static_cast<uint8_t>(take(Operand::Kind::Register, "a register")); break;
      case 'i': immediate(take(Operand::Kind::Immediate, "an immediate")); break;
      case 'o':
        if (next < operands.size()) immediate(take(Operand::Kind::Immediate, "an immediate"));
        break;
      case 'm':
        instruction.rs1 = static_cast<uint8_t>(take(Operand::Kind::Register, "a base register"));
        immediate(take(Operand::Kind::Immediate, "an offset"));
        break;
      case 'b': label = static_cast<int>(take(Operand::Kind::Label, "a label")); break;
      case 'c': instruction.imm = static_cast<int32_t>(take(Operand::Kind::Csr, "a control/status register")); break;
      default: break;
    }
  }
  if (next != operands.size())
    fail(fmt::format("{} takes {} operands, {} given", isa::full_mnemonic(instruction), next, operands.size()));
  if (label >= static_cast<int>(label_position_.size()) || label < -1) fail("branches to a label it did not make");

  track(instruction);
  if (label >= 0) {
    const bool backward = label_position_[label] >= 0;
    if (backward) {
      std::vector<EngineOrdering::Placement> placements =
          ordering_->tracker.loop_back(ordering_->loop_log_position[label], label_position_);
      // Latest first, so that each insertion leaves the places of the earlier ones where they were.
      std::sort(placements.begin(), placements.end(),
                [](const auto& x, const auto& y) { return x.instruction > y.instruction; });
      for (const EngineOrdering::Placement& placement : placements)
        insert_sync(placement.sync.from, placement.sync.to, placement.instruction);
    } else if (label_data_offset_[label] < 0) {
      ordering_->incoming[label].push_back(ordering_->tracker.state());
    }
    fixups_.push_back({instructions_.size(), label});
  }
  if (writes_register(instruction) && instruction.rd >= kFirstAllocatable) register_tile_[instruction.rd] = -1;
  instructions_.push_back(instruction);
}

std::array<isa::Instruction, 2> KernelBuilder::sync_pair(Engine from, Engine to) {
  int& id = ordering_->semaphore[static_cast<int>(from)][static_cast<int>(to)];
  if (id < 0) {
    const int next = kSemaphores - 1 - ordering_->semaphores_used();
    if (next < next_semaphore_) fail("needs more than 16 semaphores");
    id = next;
  }
  // Both halves go straight into the program: they order queues, not tiles, so they are not tracked themselves.
  isa::Instruction post{post_on(from)}, wait{wait_on(to)};
  post.imm = wait.imm = id;
  return {post, wait};
}

void KernelBuilder::emit_sync(Engine from, Engine to) {
  const auto pair = sync_pair(from, to);
  instructions_.insert(instructions_.end(), pair.begin(), pair.end());
}

void KernelBuilder::insert_sync(Engine from, Engine to, size_t at) {
  const auto pair = sync_pair(from, to);
  instructions_.insert(instructions_.begin() + static_cast<std::ptrdiff_t>(at), pair.begin(), pair.end());
  // Whatever stood at `at` or later moves on; a label at `at` now starts with the sync, which is where its branches
  // must arrive too.
  for (int64_t& position : label_position_)
    if (position > static_cast<int64_t>(at)) position += 2;
  for (Fixup& fixup : fixups_)
    if (fixup.instruction >= at) fixup.instruction += 2;
  ordering_->tracker.shift(at, 2);
}

void KernelBuilder::track(const isa::Instruction& instruction) {
  if (instruction.opcode == isa::Opcode::Fence || instruction.opcode == isa::Opcode::Barrier) {
    ordering_->tracker.fence();
    return;
  }
  const std::optional<Engine> engine = queue_engine(instruction.opcode);
  if (!engine) return;
  for (const MemoryOperand& operand : memory_operands(instruction)) {
    const int number = field_value(instruction, operand.field);
    const int tile = register_tile_[number];
    if (tile < 0)
      fail(fmt::format("{}: operand r{} ({}) is not bound to a tile", isa::disassemble(instruction), number,
                       number < kFirstAllocatable ? "a fixed register" : register_purpose_[number]));
    if (tiles_[tile].space != operand.space)
      fail(fmt::format("{}: operand r{} points into tile '{}' of the {}", isa::disassemble(instruction), number,
                       tile_names_[tile], tiles_[tile].space == Space::Scratchpad ? "scratchpad" : "accumulator"));
    if (!tile_ordered_[tile]) continue;
    // A read-modify-write (vsel's destination, an accumulating product) is tracked as the write it ends with, after
    // the syncs its read needs.
    for (const EngineOrdering::Sync& sync :
         ordering_->tracker.access(tile, *engine, operand.writes, instructions_.size()))
      emit_sync(sync.from, sync.to);
  }
}

Kernel KernelBuilder::finish(int64_t cores) {
  for (size_t k = 0; k < label_position_.size(); ++k)
    if (label_position_[k] < 0 && label_data_offset_[k] < 0 && !ordering_->incoming[k].empty())
      fail(fmt::format("branches to label {} that is never bound", k));
  const int64_t text = static_cast<int64_t>(instructions_.size());
  for (const Fixup& fixup : fixups_) {
    const int64_t target =
        label_position_[fixup.label] >= 0 ? label_position_[fixup.label] : text + label_data_offset_[fixup.label];
    if (label_position_[fixup.label] < 0 && label_data_offset_[fixup.label] < 0)
      fail(fmt::format("branches to label {} that is never bound", fixup.label));
    instructions_[fixup.instruction].imm = static_cast<int32_t>(target - static_cast<int64_t>(fixup.instruction));
  }
  Kernel kernel;
  kernel.name = name_;
  kernel.cores = cores;
  kernel.description = description_;
  kernel.words.reserve(instructions_.size() + data_.size());
  for (const isa::Instruction& instruction : instructions_) kernel.words.push_back(isa::encode(instruction));
  kernel.words.insert(kernel.words.end(), data_.begin(), data_.end());
  return kernel;
}

}  // namespace npusim::emitter
