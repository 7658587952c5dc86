// The kernel builder: the engine order it derives from tiles (checked by the timed model's hazard detector and by
// results), its build errors, labels that cannot collide, and the spec keys of the kernel cache.
#include "npusim/emitter/kernel_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/indexed_elements.h"
#include "npusim/emitter/matmul.h"
#include "npusim/emitter/spec_key.h"
#include "npusim/isa/encoding.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

using emitter::KernelBuilder;
using emitter::Reg;
using emitter::Space;
using isa::ElementType;

int count(const emitter::Kernel& kernel, isa::Opcode opcode) {
  int n = 0;
  for (uint64_t word : kernel.words) n += isa::decode(word).opcode == opcode;
  return n;
}

// out[k] = in[k] * 2 + 1 over `elements` floats, in tiles of 64, on one core: a loop whose body hands each tile from
// the DMA engine to the vector engine and back.
emitter::Kernel scale_kernel(const config::ChipConfig& config, int64_t elements) {
  KernelBuilder b("scale", config);
  const emitter::Tile data = b.tile(Space::Scratchpad, 64 * 4, "data");
  const emitter::Tile constants = b.tile(Space::Scratchpad, 2 * 4, "constants");
  Reg out = b.reg("out"), in = b.reg("in"), buffer = b.reg("buffer"), two = b.reg("two"), one = b.reg("one");
  Reg n = b.reg("n"), left = b.reg("left");
  b.Ld(out, emitter::kArgumentBlock, 0);
  b.Ld(in, emitter::kArgumentBlock, 8);
  b.point(buffer, data);
  b.point(two, constants);
  b.point(one, constants, 4);
  b.li(n, 1);
  b.Vfill(ElementType::F32, two, n, std::bit_cast<int32_t>(2.0f));
  b.Vfill(ElementType::F32, one, n, std::bit_cast<int32_t>(1.0f));
  b.li(n, 64);
  b.li(left, elements / 64);
  const emitter::Label tile = b.label();
  b.bind(tile);
  b.DmaLoad32(buffer, in, n, 4);
  b.Vmul(ElementType::F32, buffer, buffer, two, n, 1);
  b.Vadd(ElementType::F32, buffer, buffer, one, n, 1);
  b.DmaStore32(out, buffer, n, 4);
  b.add_constant(in, 256);
  b.add_constant(out, 256);
  b.Addi(left, left, -1);
  b.Bne(left, emitter::kZero, tile);
  b.Halt();
  return b.finish(1);
}

TEST(KernelBuilder, OrdersEnginesByTheTilesTheyTouchWithoutHazards) {
  config::ChipConfig config = test_config();
  const emitter::Kernel kernel = scale_kernel(config, 64 * 5);
  // Load -> vector (a pair), vector -> store (a pair); the next load overwrites the tile the store reads, on the same
  // engine, so the back edge needs nothing more: exactly two semaphore pairs, no fence.
  EXPECT_EQ(count(kernel, isa::Opcode::SemPostDma), 1) << kernel.assembly();
  EXPECT_EQ(count(kernel, isa::Opcode::SemPostVector), 1) << kernel.assembly();
  EXPECT_EQ(count(kernel, isa::Opcode::Fence), 0) << kernel.assembly();
  for (runtime::Mode mode : {runtime::Mode::Functional, runtime::Mode::Timed}) {
    runtime::Device device(config, mode);
    std::vector<float> input(320), output(320);
    std::iota(input.begin(), input.end(), -10.0f);
    const uint64_t in = device.allocate(320 * 4), out = device.allocate(320 * 4);
    device.copy_host_to_device(in, input.data(), 320 * 4);
    const uint64_t arguments[] = {out, in};
    device.launch(kernel.name, device.load_program(kernel.words), arguments, 1);
    device.copy_device_to_host(output.data(), out, 320 * 4);
    for (size_t k = 0; k < input.size(); ++k) EXPECT_EQ(output[k], input[k] * 2 + 1) << k;
    for (const runtime::CommandRecord& record : device.take_records())
      EXPECT_EQ(record.stats.hazards, 0u) << record.first_hazard;
  }
}

// Runs a kernel that stores four tiles of 64 int32 sevens to its argument, in timed mode: the sevens, no race.
void expect_four_tiles_of_sevens_without_hazards(const config::ChipConfig& config, const emitter::Kernel& kernel) {
  runtime::Device device(config, runtime::Mode::Timed);
  const uint64_t out_buffer = device.allocate(1024);
  const uint64_t arguments[] = {out_buffer};
  device.launch(kernel.name, device.load_program(kernel.words), arguments, 1);
  std::vector<int32_t> result(256);
  device.copy_device_to_host(result.data(), out_buffer, 1024);
  EXPECT_EQ(result, std::vector<int32_t>(256, 7));
  EXPECT_EQ(device.take_records().back().stats.hazards, 0u);
}

// Four tiles of 64 int32 sevens filled by the vector engine and stored by the DMA engine, in a loop; with
// `fill_another_tile_first`, each iteration first fills a tile of its own that nothing else touches.
emitter::Kernel fill_and_store_loop(const config::ChipConfig& config, bool fill_another_tile_first) {
  KernelBuilder b("fill_and_store", config);
  const emitter::Tile other = b.tile(Space::Scratchpad, 256, "other"), data = b.tile(Space::Scratchpad, 256, "data");
  Reg out = b.reg("out"), scratch = b.reg("scratch"), buffer = b.reg("buffer"), n = b.reg("n"), left = b.reg("left");
  b.Ld(out, emitter::kArgumentBlock, 0);
  b.point(scratch, other);
  b.point(buffer, data);
  b.li(n, 64);
  b.li(left, 4);
  const emitter::Label loop = b.label();
  b.bind(loop);
  if (fill_another_tile_first) b.Vfill(ElementType::I32, scratch, n, 1);
  b.Vfill(ElementType::I32, buffer, n, 7);
  b.DmaStore32(out, buffer, n, 4);
  b.add_constant(out, 256);
  b.Addi(left, left, -1);
  b.Bne(left, emitter::kZero, loop);
  b.Halt();
  return b.finish(1);
}

// A loop whose body's first access conflicts with its last: the vector engine writes the tile the DMA engine stores
// at the end of the previous iteration, so the back edge must order them.
TEST(KernelBuilder, OrdersALoopsBackEdge) {
  config::ChipConfig config = test_config();
  const emitter::Kernel kernel = fill_and_store_loop(config, false);
  EXPECT_EQ(count(kernel, isa::Opcode::SemPostVector), 1) << kernel.assembly();  // vector -> store
  EXPECT_EQ(count(kernel, isa::Opcode::SemPostDma), 1) << kernel.assembly();     // store -> next fill
  expect_four_tiles_of_sevens_without_hazards(config, kernel);
}

// The back edge's sync goes just before the body's exposed access, not before the branch: the vector engine's work on
// another tile at the top of the body does not wait for the previous iteration's store.
TEST(KernelBuilder, PlacesABackEdgeSyncAtTheExposedAccess) {
  config::ChipConfig config = test_config();
  const emitter::Kernel kernel = fill_and_store_loop(config, true);
  std::vector<isa::Opcode> opcodes;
  for (uint64_t word : kernel.words) opcodes.push_back(isa::decode(word).opcode);
  const auto at = [&](isa::Opcode opcode) {
    return std::find(opcodes.begin(), opcodes.end(), opcode) - opcodes.begin();
  };
  const auto first_fill = at(isa::Opcode::Vfill);
  EXPECT_EQ(opcodes[first_fill + 1], isa::Opcode::SemPostDma) << kernel.assembly();
  EXPECT_EQ(opcodes[first_fill + 2], isa::Opcode::SemWaitVector) << kernel.assembly();
  EXPECT_EQ(opcodes[first_fill + 3], isa::Opcode::Vfill) << kernel.assembly();
  expect_four_tiles_of_sevens_without_hazards(config, kernel);
}

// A loop body that stores a tile on some iterations only, then always, then fills it again: both stores are exposed
// to the previous iteration's fill. The back edge's sync before the first store does not cover the second, which the
// first one's block may be skipped to reach, so the second gets its own (the GEMM loop's ragged sub-tile store raced
// the next block's mx.st on the datacenter preset when its full sub-tiles' store was skipped). The first iteration
// stores the unfilled tile one tile before the output, which the test leaves out.
TEST(KernelBuilder, ABackEdgeSyncInAConditionalBlockDoesNotCoverWhatFollowsIt) {
  config::ChipConfig config = test_config();
  constexpr int64_t kElements = 4096;  // a fill long enough for a store it is not ordered before to overlap it
  KernelBuilder b("conditional_store", config);
  const emitter::Tile data = b.tile(Space::Scratchpad, kElements * 4, "data");
  Reg out = b.reg("out"), buffer = b.reg("buffer"), n = b.reg("n"), left = b.reg("left"), odd = b.reg("odd");
  b.Ld(out, emitter::kArgumentBlock, 0);
  b.point(buffer, data);
  b.li(n, kElements);
  b.li(left, 4);
  const emitter::Label loop = b.label(), even = b.label();
  b.bind(loop);
  b.Andi(odd, left, 1);
  b.Beq(odd, emitter::kZero, even);
  b.DmaStore32(out, buffer, n, 4);
  b.bind(even);
  b.DmaStore32(out, buffer, n, 4);
  b.add_constant(out, kElements * 4);
  b.Vfill(ElementType::I32, buffer, n, 7);
  b.Addi(left, left, -1);
  b.Bne(left, emitter::kZero, loop);
  b.DmaStore32(out, buffer, n, 4);
  b.Halt();
  const emitter::Kernel kernel = b.finish(1);
  // One before each store in the loop (the back edge's), one before the store after it.
  EXPECT_EQ(count(kernel, isa::Opcode::SemPostVector), 3) << kernel.assembly();
  runtime::Device device(config, runtime::Mode::Timed);
  const uint64_t out_buffer = device.allocate(5 * kElements * 4);
  const uint64_t arguments[] = {out_buffer};
  device.launch(kernel.name, device.load_program(kernel.words), arguments, 1);
  std::vector<int32_t> result(4 * kElements);
  device.copy_device_to_host(result.data(), out_buffer + kElements * 4, 4 * kElements * 4);
  EXPECT_EQ(result, std::vector<int32_t>(4 * kElements, 7));
  const runtime::CommandRecord record = device.take_records().back();
  EXPECT_EQ(record.stats.hazards, 0u) << record.first_hazard;
}

// Two labels bound at one place after a jump: the code there is reached through both, so the vector engine's fill,
// pending on the branch to the first label, must be ordered before the store although the jump's path fenced it.
TEST(KernelBuilder, TwoLabelsAtOnePlaceAfterAJumpKeepBothPaths) {
  config::ChipConfig config = test_config();
  KernelBuilder b("two_labels", config);
  const emitter::Tile data = b.tile(Space::Scratchpad, 1024, "data");
  Reg out = b.reg("out"), buffer = b.reg("buffer"), n = b.reg("n");
  b.Ld(out, emitter::kArgumentBlock, 0);
  b.point(buffer, data);
  b.li(n, 256);
  b.Vfill(ElementType::I32, buffer, n, 7);
  const emitter::Label first = b.label(), second = b.label();
  b.Bne(n, emitter::kZero, first);  // taken
  b.Fence();
  b.Jal(emitter::kZero, second);
  b.bind(first);
  b.bind(second);
  b.DmaStore32(out, buffer, n, 4);
  b.Halt();
  const emitter::Kernel kernel = b.finish(1);
  EXPECT_EQ(count(kernel, isa::Opcode::SemPostVector), 1) << kernel.assembly();
  expect_four_tiles_of_sevens_without_hazards(config, kernel);
}

TEST(KernelBuilder, NamesTheKernelWhenRegistersRunOut) {
  KernelBuilder b("greedy", test_config());
  std::vector<Reg> held;
  for (int k = 0; k < 30; ++k) held.push_back(b.reg("held"));
  try {
    b.reg("one too many");
    FAIL() << "a 31st register was handed out";
  } catch (const emitter::BuildError& error) {
    EXPECT_NE(std::string(error.what()).find("kernel greedy: needs a register for 'one too many'"), std::string::npos)
        << error.what();
  }
  held.pop_back();  // a released register is handed out again
  EXPECT_NO_THROW(b.reg("again"));
}

TEST(KernelBuilder, NamesATileThatDoesNotFit) {
  config::ChipConfig config = test_config();
  KernelBuilder b("big", config);
  b.tile(Space::Scratchpad, static_cast<int64_t>(config.scratchpad_bytes()) - 64, "most");
  EXPECT_THROW(
      {
        try {
          b.tile(Space::Scratchpad, 128, "more");
        } catch (const emitter::BuildError& error) {
          EXPECT_NE(std::string(error.what()).find("kernel big: tile 'more' of 128 bytes does not fit the scratchpad"),
                    std::string::npos)
              << error.what();
          throw;
        }
      },
      emitter::BuildError);
}

TEST(KernelBuilder, RejectsOperandsOfTheWrongKind) {
  KernelBuilder b("wrong", test_config());
  Reg x = b.reg("x"), n = b.reg("n");
  EXPECT_THROW(b.Vadd(ElementType::F32, x, x, x, n), emitter::BuildError);  // x is bound to no tile
  EXPECT_THROW(b.Add(x, x, 5), emitter::BuildError);                        // an immediate where rs2 goes
  EXPECT_THROW(b.Vand(ElementType::F32, x, x, x, n), emitter::BuildError);  // vand takes integers
  EXPECT_THROW(b.Addi(x, x, int64_t{1} << 40), emitter::BuildError);        // beyond the immediate field
  const emitter::Label nowhere = b.label();
  b.Beq(x, n, nowhere);
  EXPECT_THROW(b.finish(1), emitter::BuildError);
}

// The same piece built twice in one kernel: its labels are distinct objects, so the loops stay apart.
TEST(KernelBuilder, APieceUsedTwiceKeepsItsOwnLabels) {
  config::ChipConfig config = test_config();
  KernelBuilder b("twice", config);
  Reg counter = b.reg("counter"), total = b.reg("total");
  b.li(total, 0);
  const auto count_down = [&](int64_t from) {
    b.li(counter, from);
    const emitter::Label loop = b.label();
    b.bind(loop);
    b.Addi(total, total, 1);
    b.Addi(counter, counter, -1);
    b.Bne(counter, emitter::kZero, loop);
  };
  count_down(3);
  count_down(4);
  Reg address = b.reg("address");
  b.Ld(address, emitter::kArgumentBlock, 0);
  b.St(total, address, 0);
  b.Halt();
  const emitter::Kernel kernel = b.finish(1);
  runtime::Device device(config, runtime::Mode::Functional);
  const uint64_t result = device.allocate(8);
  const uint64_t arguments[] = {result};
  device.launch(kernel.name, device.load_program(kernel.words), arguments, 1);
  int64_t value = 0;
  device.copy_device_to_host(&value, result, 8);
  EXPECT_EQ(value, 7);
}

// Every DMA, vector and matrix instruction of the ISA table has its memory effects listed, so the builder can order
// it.
TEST(KernelBuilder, KnowsTheMemoryEffectsOfEveryQueueInstruction) {
  KernelBuilder b("all", test_config());
  for (const isa::InstructionInfo& row : isa::kInstructionTable) {
    const isa::TimingClass timing = row.timing;
    if (timing != isa::TimingClass::Dma && timing != isa::TimingClass::Vector &&
        timing != isa::TimingClass::VectorSpecial && timing != isa::TimingClass::Matrix)
      continue;
    std::vector<emitter::Operand> operands;
    if (row.typed()) operands.emplace_back(ElementType::F32);
    if (row.types == isa::TypeForm::Conversion) operands.emplace_back(ElementType::F32);
    // Operands of registers bound to no tile: every memory operand is refused with the builder's own error, and an
    // instruction the effects table does not know fails differently (std::logic_error that is no BuildError).
    for (char letter : row.operands)
      if (letter == 'd' || letter == 's' || letter == 't' || letter == 'u')
        operands.emplace_back(emitter::R{5});
      else if (letter == 'i' || letter == 'o')
        operands.emplace_back(int64_t{0});
    try {
      b.emit(row.opcode, operands);
    } catch (const emitter::BuildError&) {
    } catch (const std::logic_error& error) {
      ADD_FAILURE() << row.name << ": " << error.what();
    }
  }
}

// The cache key is the spec: every field counts, including the one a hand-written key once left out.
TEST(SpecKey, EveryFieldOfASpecChangesItsKey) {
  using emitter::spec_key::equal;
  using emitter::spec_key::hash;
  emitter::IndexedElementsSpec a, b;
  EXPECT_TRUE(equal(a, b));
  EXPECT_EQ(hash(a), hash(b));
  b.wrap_negative = true;
  EXPECT_FALSE(equal(a, b));
  EXPECT_NE(hash(a), hash(b));
  b = a;
  b.index.inner = 3;  // a field of a nested struct
  EXPECT_FALSE(equal(a, b));
  emitter::ElementwiseSpec x, y;
  y.parameters[2] = 0.5f;
  EXPECT_FALSE(equal(x, y));
  x.parameters[2] = y.parameters[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(equal(x, y));  // by bits: a NaN parameter finds its kernel
  emitter::MatmulSpec m, n;
  n.output_type = ElementType::F32;
  EXPECT_FALSE(equal(m, n));  // none and f32 are different specs
  // The generated key sees every declared field (a count that would drift if a spec stopped being a plain aggregate).
  EXPECT_EQ(emitter::spec_key::field_count<emitter::IndexedElementsSpec>(), 11u);
  EXPECT_EQ(emitter::spec_key::field_count<emitter::MatmulSpec>(), 18u);
}

}  // namespace
}  // namespace npusim
