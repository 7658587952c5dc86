// Random numbers inside fused kernels (FusedOpcode::RandomUniform / RandomNormal): each point's number is the draw at
// its row-major index in the space, whatever the tiles, blocks, cores and the other accesses' strides, so a fused
// kernel draws exactly what a flat random kernel (random.h) of the same key and first position draws, which is the
// ISA's definition (Philox4x32-10 at the position).
#include <gtest/gtest.h>

#include "fused_kernels_support.h"
#include "npusim/emitter/random.h"
#include "semantics/philox.h"

namespace npusim::fused_test {
namespace {

constexpr uint64_t kKey = 0x243f6a8885a308d3ull;
constexpr int64_t kFirstPosition = 1000;

// The numbers a flat random kernel draws: `count` of `type` (uniform on its grid in [0, 1), or standard normal).
Bytes flat_draws(emitter::RandomOp op, ElementType type, int64_t count) {
  runtime::Device device(small_chip(), runtime::Mode::Functional);
  const uint64_t bytes = count * isa::element_bytes(type), out = device.allocate(bytes);
  const emitter::Kernel kernel = emitter::emit_random({op, count, type}, device.config());
  const uint64_t arguments[] = {out, 0, 0, kKey, kFirstPosition, 0, std::bit_cast<uint32_t>(1.0f)};  // low 0, span 1
  device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
  Bytes result(bytes);
  device.copy_device_to_host(result.data(), out, bytes);
  return result;
}

// The key as an i64 tensor of one element, read by a load with strides 0.
Bytes key_buffer() {
  return buffer_of(ElementType::I64, 1, [](int64_t) { return 0.0; });
}
Bytes with_key(Bytes buffer) {
  std::memcpy(buffer.data(), &kKey, 8);
  return buffer;
}

int draw(SpecBuilder& s, Op op, ElementType type) {
  const int key = s.load(0, ElementType::I64, std::vector<int64_t>(s.spec.sizes.size(), 0));
  return s.op(op, type, key, s.constant(ElementType::I64, kFirstPosition));
}

TEST(FusedRandom, EachPointDrawsAtItsRowMajorIndexWhateverTheTilesAndTheOtherAccesses) {
  // 5 x 7 x 300 points over 4 KiB tiles on three cores; x is read transposed over the outer dimensions.
  const int64_t a = 5, b = 7, c = 300, count = a * b * c;
  SpecBuilder s("random_add", {a, b, c}, 0, 3);
  const int x = s.load(1, F32, {c, a * c, 1});
  s.store(s.op(Op::Add, F32, x, draw(s, Op::RandomUniform, F32)), 2, F32, {b * c, c, 1});
  const Bytes input = random_buffer(F32, count, 3, -1, 1);
  BothModes modes(small_chip());
  const std::vector<Bytes> out =
      modes.run(emitter::emit_fused(s.spec, small_chip()), {with_key(key_buffer()), input, Bytes(count * 4)});
  EXPECT_GT(modes.last_record().cores, 1u);
  const Bytes u = flat_draws(emitter::RandomOp::Uniform, F32, count);
  for (int64_t point : {int64_t{0}, int64_t{1}, count / 2, count - 1})  // the ISA's definition at position first + k
    ASSERT_EQ(read_element(u, F32, point),
              std::ldexp(emulator::semantics::philox_at(kKey, kFirstPosition + point)[0] >> 8, -24))
        << point;
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k) {
        const int64_t point = (i * b + j) * c + k;
        const float expected = static_cast<float>(read_element(input, F32, j * a * c + i * c + k)) +
                               static_cast<float>(read_element(u, F32, point));
        ASSERT_EQ(read_element(out[2], F32, point), expected) << i << ", " << j << ", " << k;
      }
}

TEST(FusedRandom, RowsOfDrawsReduceAndHalfPrecisionDrawsOnItsGrid) {
  // 40 rows of 130: each row's maximum of normal draws, and the draws themselves in bf16 and uniform f16.
  const int64_t rows = 40, cols = 130, count = rows * cols;
  SpecBuilder s("random_rows", {rows, cols}, 1, 4);
  const int z = draw(s, Op::RandomNormal, F32);
  s.store(s.op(Op::ReduceMax, F32, z), 1, F32, {1, 0});
  s.store(z, 2, ElementType::BF16, {cols, 1});
  s.store(draw(s, Op::RandomUniform, ElementType::F16), 3, ElementType::F16, {cols, 1});
  BothModes modes(small_chip());
  const std::vector<Bytes> out =
      modes.run(emitter::emit_fused(s.spec, small_chip()),
                {with_key(key_buffer()), Bytes(rows * 4), Bytes(count * 2), Bytes(count * 2)});
  const Bytes normal = flat_draws(emitter::RandomOp::Normal, F32, count);
  const Bytes uniform = flat_draws(emitter::RandomOp::Uniform, ElementType::F16, count);
  for (int64_t r = 0; r < rows; ++r) {
    double most = -INFINITY;
    for (int64_t k = 0; k < cols; ++k) {
      const double value = read_element(normal, F32, r * cols + k);
      most = std::max(most, value);
      ASSERT_EQ(read_element(out[2], ElementType::BF16, r * cols + k), round_to(ElementType::BF16, value));
      ASSERT_EQ(read_element(out[3], ElementType::F16, r * cols + k),
                read_element(uniform, ElementType::F16, r * cols + k));
    }
    EXPECT_EQ(read_element(out[1], F32, r), most) << r;
  }
}

TEST(FusedRandom, ATileWhosePointsAreNotConsecutiveIsUnsupported) {
  SpecBuilder s("random_transposed", {64, 64}, 0, 2);
  s.store(draw(s, Op::RandomUniform, F32), 1, F32, {1, 64});  // the first store walks the space column by column
  try {
    emitter::emit_fused(s.spec, small_chip());
    ADD_FAILURE() << "a transposed random store was emitted";
  } catch (const emitter::Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find("random_transposed: random numbers over a tile"), std::string::npos)
        << error.what();
  }
}

TEST(FusedRandom, AKeyThatIsNotAScalarOrNotAnIntegerIsAnInvalidArgumentNamingTheNode) {
  const auto expect_invalid = [](const FusedSpec& spec, const std::string& what) {
    try {
      emitter::emit_fused(spec, small_chip());
      ADD_FAILURE() << "emitted " << spec.name;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(what), std::string::npos) << error.what();
    }
  };
  {
    SpecBuilder s("varying_key", {100}, 0, 2);
    const int key = s.load(0, ElementType::I64, {1});
    s.store(s.op(Op::RandomUniform, F32, key, s.constant(ElementType::I64, 0)), 1, F32, {1});
    expect_invalid(s.spec, "node 2 (RandomUniform): the key is node 0, not a constant, an argument or a load");
  }
  {
    SpecBuilder s("float_position", {100}, 0, 1);
    s.store(s.op(Op::RandomNormal, F32, s.constant(ElementType::I64, 1), s.constant(F32, 0)), 0, F32, {1});
    expect_invalid(s.spec, "node 2 (RandomNormal): the first position is f32, not i64");
  }
  {
    SpecBuilder s("integer_draws", {100}, 0, 1);
    const int zero = s.constant(ElementType::I64, 0);
    s.store(s.op(Op::RandomUniform, ElementType::I32, zero, zero), 0, ElementType::I32, {1});
    expect_invalid(s.spec, "node 1 (RandomUniform): random numbers of i32");
  }
}

}  // namespace
}  // namespace npusim::fused_test
