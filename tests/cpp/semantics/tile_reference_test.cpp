// Matrix and vector tile operations against plain reference loops on random data, for every type they take.
#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

// ---- tile operations against plain reference loops, on random data, for every type they take

template <typename T>
std::vector<T> random_values(size_t count, std::mt19937& random) {
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<T> values(count);
  for (T& value : values) {
    if constexpr (std::is_integral_v<T>)
      value = static_cast<T>(static_cast<int>(uniform(random) * 30));
    else
      value = T(uniform(random));
  }
  return values;
}

// A K x N weight tile on a 16 x 16 array times M rows, twice (the second accumulating), against a loop that
// accumulates each output in k order by fused multiply-adds: M = 13 (8 + 4 + 1 rows) and N = 16 or 7 cover every
// register block and every kind of edge.
template <typename T, typename Acc>
void check_matrix_against_reference(const std::string& type, const std::string& out_type) {
  config::ChipConfig config = Semantics::config();
  config.core_systolic_rows = config.core_systolic_cols = 16;
  FunctionalChip chip(config);
  std::mt19937 random(5);
  for (const uint64_t n : {16, 7}) {
    const uint64_t m = 13, k = 16;
    const std::vector<T> a = random_values<T>(m * k, random), w = random_values<T>(k * n, random);
    chip.memory().write(kData, a.data(), a.size() * sizeof(T));
    chip.memory().write(kData + 0x4000, w.data(), w.size() * sizeof(T));
    const auto program = isa::assemble(
        fmt::format("li r2, {0}\n dma.ld.b8 r0, r1, r2, 1\n li r3, 0x4000\n add r4, r1, r3\n li r2, {1}\n"
                    " dma.ld.b8 r3, r4, r2, 1\n fence\n li r5, {2}\n li r6, {3}\n li r7, {4}\n"
                    " mx.ldw.{5} r3, r5, r6\n mx.mac.{5} r0, r0, r7, 0\n mx.mac.{5} r0, r0, r7, 1\n li r8, {6}\n"
                    " li r9, 0x8000\n mx.st.{7} r9, r0, r8\n fence\n add r10, r1, r9\n li r2, {8}\n"
                    " dma.st.b8 r10, r9, r2, 1\n fence\n halt\n",
                    a.size() * sizeof(T), w.size() * sizeof(T), k, n, m, type, m * n, out_type, m * n * 4),
        "matrix.s");
    chip.memory().write(kProgram, program.data(), program.size() * 8);
    ASSERT_FALSE(chip.run_kernel(0, kProgram, kData));
    std::vector<Acc> out(m * n);
    chip.memory().read(kData + 0x8000, out.data(), out.size() * sizeof(Acc));
    for (uint64_t row = 0; row < m; ++row)
      for (uint64_t col = 0; col < n; ++col) {
        Acc sum{};
        for (int pass = 0; pass < 2; ++pass)
          for (uint64_t depth = 0; depth < k; ++depth) {
            if constexpr (std::is_integral_v<Acc>)
              sum = static_cast<Acc>(static_cast<uint32_t>(sum) +
                                     static_cast<uint32_t>(a[row * k + depth] * w[depth * n + col]));
            else
              sum = std::fma(static_cast<float>(a[row * k + depth]), static_cast<float>(w[depth * n + col]), sum);
          }
        EXPECT_EQ(out[row * n + col], sum) << type << " " << row << "," << col;
      }
  }
}
TEST(MatrixTiles, MatchAPlainReferenceLoopOnRandomDataForEveryInputType) {
  check_matrix_against_reference<float, float>("f32", "f32");
  check_matrix_against_reference<Half, float>("f16", "f32");
  check_matrix_against_reference<BFloat16, float>("bf16", "f32");
  check_matrix_against_reference<int8_t, int32_t>("i8", "i32");
}

// Elementwise arithmetic on random elements of each numeric type (as many as a 4 KiB slot holds, up to 1000)
// against the same operation in a loop.
template <typename T>
void check_vector_against_reference(Semantics& test, const std::string& type) {
  std::mt19937 random(9);
  const size_t count = std::min<size_t>(1000, kSlotBytes / sizeof(T));
  const std::vector<T> a = random_values<T>(count, random), b = random_values<T>(count, random);
  const auto reference = [&](auto operation) {
    std::vector<T> expected(a.size());
    for (size_t k = 0; k < a.size(); ++k) {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        expected[k] = T(operation(static_cast<float>(a[k]), static_cast<float>(b[k])));
      else
        expected[k] = static_cast<T>(operation(static_cast<int64_t>(a[k]), static_cast<int64_t>(b[k])));
    }
    return expected;
  };
  const auto bits_of = [](const std::vector<T>& values) { return bytes_of(values); };
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vadd.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x + y; })))
      << type;
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vsub.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x - y; })))
      << type;
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vmul.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x * y; })))
      << type;
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vmax.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x < y ? y : x; })))
      << type;
}
class VectorTiles : public Semantics {};
TEST_F(VectorTiles, MatchAPlainReferenceLoopOnRandomDataForEveryNumericType) {
  check_vector_against_reference<float>(*this, "f32");
  check_vector_against_reference<Half>(*this, "f16");
  check_vector_against_reference<BFloat16>(*this, "bf16");
  check_vector_against_reference<int8_t>(*this, "i8");
  check_vector_against_reference<uint8_t>(*this, "u8");
  check_vector_against_reference<int32_t>(*this, "i32");
  check_vector_against_reference<int64_t>(*this, "i64");
}

}  // namespace npusim::emulator::semantics_test
