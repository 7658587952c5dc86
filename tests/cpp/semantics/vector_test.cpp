// Vector engine: arithmetic with broadcast operands, compares, select, fill, move, conversions, unary and special
// functions, random numbers, row reductions.
#include <numbers>

#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

// ---- vector engine: arithmetic in every type, with the broadcast modes
TEST_F(Vadd, IsIeeeFloat32) {
  const std::vector<float> a = {1.5f, -0.0f, kInf, 3e38f, 1e-45f}, b = {2.25f, 0.0f, -kInf, 3e38f, 1e-45f};
  const auto out = vector_op<float>("vadd.f32 r13, r10, r11, r14", a, b);
  for (size_t k = 0; k < a.size(); ++k)
    if (k != 2) EXPECT_EQ(bits(out[k]), bits(a[k] + b[k])) << k;
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_TRUE(std::isinf(out[3]));
  EXPECT_EQ(out[4], 2 * std::numeric_limits<float>::denorm_min());  // denormals are kept, not flushed
}
TEST_F(Vadd, RoundsHalfAndBFloat16OnceToNearestEven) {
  const std::vector<Half> a = {Half(1.0f), Half(2048.0f), Half(65504.0f)},
                          b = {Half(0.0009765625f), Half(1.0f), Half(32.0f)};
  const auto out = vector_op<Half>("vadd.f16 r13, r10, r11, r14", a, b);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(out[k], Half(float(a[k]) + float(b[k]))) << k;
  EXPECT_EQ(float(out[1]), 2048.0f);  // 2049 is a tie between 2048 and 2050: even wins
  const std::vector<BFloat16> c = {BFloat16(1.0f), BFloat16(256.0f)}, d = {BFloat16(0.00390625f), BFloat16(1.0f)};
  const auto bf = vector_op<BFloat16>("vadd.bf16 r13, r10, r11, r14", c, d);
  EXPECT_EQ(float(bf[0]), 1.0f);
  EXPECT_EQ(float(bf[1]), 256.0f);  // 257 rounds to even
}
TEST_F(Vadd, IntegersWrap) {
  EXPECT_EQ((vector_op<int8_t>("vadd.i8 r13, r10, r11, r14", {127, -128}, {1, -1})), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ((vector_op<uint8_t>("vadd.u8 r13, r10, r11, r14", {255}, {2})), (std::vector<uint8_t>{1}));
  EXPECT_EQ((vector_op<int64_t>("vadd.i64 r13, r10, r11, r14", {INT64_MAX}, {1})), (std::vector<int64_t>{INT64_MIN}));
  // 64-bit lanes wrap in every operation (they overflowed signed arithmetic, undefined behaviour UBSan found)
  EXPECT_EQ((vector_op<int64_t>("vsub.i64 r13, r10, r11, r14", {INT64_MIN}, {1})), (std::vector<int64_t>{INT64_MAX}));
  EXPECT_EQ((vector_op<int64_t>("vmul.i64 r13, r10, r11, r14", {INT64_MAX}, {2})), (std::vector<int64_t>{-2}));
}
TEST_F(Vadd, BroadcastsScalarRowAndColumn) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};  // 2 rows of 3
  EXPECT_EQ(vector_op<float>("vadd.f32 r13, r10, r11, r14, 1", a, {10}), (std::vector<float>{11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(vector_op<float>("vadd.f32 r13, r10, r11, r14, 2 + (3 << 2)", a, {10, 20, 30}),
            (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(vector_op<float>("vadd.f32 r13, r10, r11, r14, 3 + (3 << 2)", a, {10, 20}),
            (std::vector<float>{11, 12, 13, 24, 25, 26}));
  EXPECT_EQ(trap_of("li r14, 4\n vadd.f32 r13, r10, r11, r14, 2\n halt\n"), "broadcast mode 2 with period 0");
}
TEST_F(Vadd, InPlaceScalarBroadcastReadsTheScalarFirst) {
  // out = b: writing out[0] must not change the scalar added to later elements.
  const auto out = tile("vadd.f32 r11, r10, r11, r14, 1\n fence\n vmov.f32 r13, r11, r14", 3, 12,
                        {bytes_of(std::vector<float>{1, 2, 3}), bytes_of(std::vector<float>{10})});
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{11, 12, 13}));
}
TEST_F(Vsub, SubtractsInEveryType) {
  EXPECT_EQ(vector_op<float>("vsub.f32 r13, r10, r11, r14", {1.5f, 0.0f}, {0.25f, 0.0f}),
            (std::vector<float>{1.25f, 0.0f}));
  EXPECT_EQ((vector_op<int32_t>("vsub.i32 r13, r10, r11, r14", {INT32_MIN}, {1})), (std::vector<int32_t>{INT32_MAX}));
}
TEST_F(Vmul, MultipliesInEveryType) {
  const auto out = vector_op<BFloat16>("vmul.bf16 r13, r10, r11, r14", {BFloat16(3.0f)}, {BFloat16(1.0f / 3.0f)});
  EXPECT_EQ(out[0], BFloat16(3.0f * float(BFloat16(1.0f / 3.0f))));
  EXPECT_EQ((vector_op<int8_t>("vmul.i8 r13, r10, r11, r14", {16}, {16})), (std::vector<int8_t>{0}));
}
TEST_F(Vrem, IsTheExactTruncatedRemainderInEveryType) {
  // fmod is exact: 5.3 - 2 x 2.1 computed in floating point would round differently.
  const auto out =
      vector_op<float>("vrem.f32 r13, r10, r11, r14", {5.3f, -5.3f, 1e30f, 1.0f, kInf}, {2.1f, 2.1f, 3.0f, 0.0f, 1.0f});
  EXPECT_EQ(bits(out[0]), bits(std::fmod(5.3f, 2.1f)));
  EXPECT_EQ(bits(out[1]), bits(-std::fmod(5.3f, 2.1f)));  // the dividend's sign
  EXPECT_EQ(bits(out[2]), bits(std::fmod(1e30f, 3.0f)));
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_TRUE(std::isnan(out[4]));
  const auto half = vector_op<BFloat16>("vrem.bf16 r13, r10, r11, r14", {BFloat16(7.5f)}, {BFloat16(-2.0f)});
  EXPECT_EQ(float(half[0]), 1.5f);
  EXPECT_EQ((vector_op<int32_t>("vrem.i32 r13, r10, r11, r14", {-7, 7, INT32_MIN}, {2, -2, -1})),
            (std::vector<int32_t>{-1, 1, 0}));
  EXPECT_EQ(trap_of("li r14, 1\n vfill.i32 r11, r14, 0\n vrem.i32 r13, r10, r11, r14\n halt\n"),
            "integer division by zero in vrem");
}
TEST_F(Vdiv, FloatsFollowIeeeAndIntegersTruncate) {
  const auto out = vector_op<float>("vdiv.f32 r13, r10, r11, r14", {1.0f, 1.0f, 0.0f}, {3.0f, 0.0f, 0.0f});
  EXPECT_EQ(bits(out[0]), bits(1.0f / 3.0f));
  EXPECT_EQ(out[1], kInf);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ((vector_op<int32_t>("vdiv.i32 r13, r10, r11, r14", {-7, INT32_MIN}, {2, -1})),
            (std::vector<int32_t>{-3, INT32_MIN}));
  EXPECT_EQ(trap_of("li r14, 1\n vfill.i32 r11, r14, 0\n vdiv.i32 r13, r10, r11, r14\n halt\n"),
            "integer division by zero in vdiv");
}
TEST_F(Vmax, PropagatesNan) {
  const auto out = vector_op<float>("vmax.f32 r13, r10, r11, r14", {1.0f, kNan, -0.5f}, {2.0f, 0.0f, kNan});
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_TRUE(std::isnan(out[1]) && std::isnan(out[2]));
  EXPECT_EQ((vector_op<int8_t>("vmax.i8 r13, r10, r11, r14", {-5}, {3})), (std::vector<int8_t>{3}));
}
TEST_F(Vmin, PropagatesNan) {
  const auto out = vector_op<float>("vmin.f32 r13, r10, r11, r14", {1.0f, kNan}, {2.0f, 0.0f});
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ((vector_op<uint8_t>("vmin.u8 r13, r10, r11, r14", {200}, {3})), (std::vector<uint8_t>{3}));
}
TEST_F(Vand, IsBitwiseOnIntegers) {
  EXPECT_EQ((vector_op<int32_t>("vand.i32 r13, r10, r11, r14", {0x0ff0}, {0x00ff})), (std::vector<int32_t>{0x00f0}));
}
TEST_F(Vor, IsBitwiseOnIntegers) {
  EXPECT_EQ((vector_op<uint8_t>("vor.u8 r13, r10, r11, r14", {0xf0}, {0x0f})), (std::vector<uint8_t>{0xff}));
}
TEST_F(Vxor, IsBitwiseOnIntegers) {
  EXPECT_EQ((vector_op<int64_t>("vxor.i64 r13, r10, r11, r14", {-1}, {1})), (std::vector<int64_t>{-2}));
}

// ---- compares give bool bytes; select merges under a mask
TEST_F(Vceq, IsFalseForNan) {
  EXPECT_EQ((vector_op<float, uint8_t>("vceq.f32 r13, r10, r11, r14", {1.0f, kNan, -0.0f}, {1.0f, kNan, 0.0f})),
            (std::vector<uint8_t>{1, 0, 1}));
}
TEST_F(Vcne, IsTrueForNan) {
  EXPECT_EQ((vector_op<float, uint8_t>("vcne.f32 r13, r10, r11, r14", {1.0f, kNan}, {1.0f, kNan})),
            (std::vector<uint8_t>{0, 1}));
}
TEST_F(Vclt, ComparesSignedAndUnsigned) {
  EXPECT_EQ((vector_op<int8_t, uint8_t>("vclt.i8 r13, r10, r11, r14", {-1, 5}, {0, 5})), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ((vector_op<uint8_t, uint8_t>("vclt.u8 r13, r10, r11, r14", {255}, {0})), (std::vector<uint8_t>{0}));
  EXPECT_EQ((vector_op<float, uint8_t>("vclt.f32 r13, r10, r11, r14, 1", {-1.0f, kNan, 3.0f}, {0.0f})),
            (std::vector<uint8_t>{1, 0, 0}));
}
TEST_F(Vcle, IncludesEquality) {
  EXPECT_EQ(
      (vector_op<Half, uint8_t>("vcle.f16 r13, r10, r11, r14", {Half(1.0f), Half(2.0f)}, {Half(1.0f), Half(1.0f)})),
      (std::vector<uint8_t>{1, 0}));
}
// Found by the program fuzz target under UBSan: results of no elements were copied from an empty vector's null data.
TEST_F(Vsel, InstructionsOfNoElementsDoNothing) {
  EXPECT_FALSE(
      run("li r14, 0\n vsel.f32 r13, r10, r11, r14, 1\n vadd.f32 r13, r10, r11, r14, 2 + (3 << 2)\n"
          " vcvt.f16.f32 r13, r10, r14\n vtr.f32 r13, r10, r14, r14\n vrmin.f32 r13, r10, r14, r14\n"
          " vmov.f32 r13, r10, r14\n halt\n"));
}
TEST_F(Vsel, MergesWhereTheMaskIsSet) {
  const std::vector<uint8_t> mask = {1, 0, 1, 0};
  const auto out = vector_op<float>("vsel.f32 r13, r12, r11, r14", {0, 0, 0, 0}, {1, 2, 3, 4}, bytes_of(mask),
                                    std::vector<float>{9, 9, 9, 9});
  EXPECT_EQ(out, (std::vector<float>{1, 9, 3, 9}));
  const auto filled = vector_op<float>("vsel.f32 r13, r12, r11, r14, 1", {0, 0, 0, 0}, {-kInf}, bytes_of(mask),
                                       std::vector<float>{9, 9, 9, 9});
  EXPECT_EQ(filled, (std::vector<float>{-kInf, 9, -kInf, 9}));  // masked_fill with a scalar
}
// The product is not rounded before the sum: 1 + 2^-12 squared is 1 + 2^-11 + 2^-24, whose last term a rounded
// product (1 + 2^-11) would lose; minus (1 + 2^-11) leaves exactly 2^-24.
TEST_F(Vfma, RoundsOnceAndAccumulatesIntoTheDestination) {
  const float x = 1.0f + 0x1p-12f, minus = -(1.0f + 0x1p-11f);
  const auto out = vector_op<float>("vfma.f32 r13, r10, r11, r14", {x, 2.0f, 3.0f}, {x, 0.5f, -1.0f}, {},
                                    std::vector<float>{minus, 10.0f, 3.0f});
  EXPECT_EQ(out[0], 0x1p-24f);
  EXPECT_EQ(out[1], 11.0f);
  EXPECT_EQ(bits(out[2]), bits(0.0f));
  EXPECT_EQ(vector_op<float>("vfma.f32 r13, r10, r11, r14, 1", {1.0f, 2.0f}, {4.0f}, {}, std::vector<float>{1, 1}),
            (std::vector<float>{5.0f, 9.0f}));  // a scalar multiplier
  const auto half = vector_op<BFloat16>("vfma.bf16 r13, r10, r11, r14", {BFloat16(3.0f)}, {BFloat16(0.5f)}, {},
                                        std::vector<BFloat16>{BFloat16(256.0f)});
  EXPECT_EQ(float(half[0]), 258.0f);  // 257.5 rounds to bf16's 258
}
TEST_F(Vfill, TakesImmediateBitsForFloatsAndValuesForIntegers) {
  EXPECT_EQ(values_of<float>(tile("vfill.f32 r13, r14, 0x3fc00000", 3, 12, {})),
            (std::vector<float>{1.5f, 1.5f, 1.5f}));
  EXPECT_EQ(values_of<Half>(tile("vfill.f16 r13, r14, 0x3c00", 2, 4, {})), (std::vector<Half>{Half(1.0f), Half(1.0f)}));
  EXPECT_EQ(values_of<BFloat16>(tile("vfill.bf16 r13, r14, 0xbf80", 1, 2, {})),
            (std::vector<BFloat16>{BFloat16(-1.0f)}));
  EXPECT_EQ(values_of<int64_t>(tile("vfill.i64 r13, r14, -3", 2, 16, {})), (std::vector<int64_t>{-3, -3}));
  EXPECT_EQ(values_of<uint8_t>(tile("vfill.bool r13, r14, 7", 2, 2, {})), (std::vector<uint8_t>{1, 1}));
}
TEST_F(Vmov, CopiesOverlappingRegions) {
  const auto out = tile("vmov.i32 r13, r10, r14\n fence\n addi r16, r13, 4\n vmov.i32 r16, r13, r14", 3, 16,
                        {bytes_of(std::vector<int32_t>{1, 2, 3})});
  EXPECT_EQ(values_of<int32_t>(out), (std::vector<int32_t>{1, 1, 2, 3}));
}

// A 2 x 3 tile becomes 3 x 2, bits kept (a signalling-NaN pattern and -0 pass unchanged), and in place.
TEST_F(Vtr, TransposesATileAsBits) {
  const std::vector<uint32_t> in = {1, 2, 0x7f800001u, 0x80000000u, 5, 6};
  EXPECT_EQ(values_of<uint32_t>(tile("vtr.f32 r13, r10, r15, r14", 3, 24, {bytes_of(in)}, 2)),
            (std::vector<uint32_t>{1, 0x80000000u, 2, 5, 0x7f800001u, 6}));
  const std::vector<int64_t> wide = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(values_of<int64_t>(tile("vtr.i64 r10, r10, r15, r14\n fence\n li r16, 6\n vmov.i64 r13, r10, r16", 2, 48,
                                    {bytes_of(wide)}, 3)),
            (std::vector<int64_t>{1, 3, 5, 2, 4, 6}));
}

// ---- conversions
TEST_F(Vcvt, FloatToFloatRoundsToNearestEven) {
  const std::vector<float> in = {1.0009765625f * 1.5f, 65520.0f, 1e-8f, kNan};
  const auto half = vector_op<float, Half>("vcvt.f16.f32 r13, r10, r14", in);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(bits(float(half[k])), bits(float(Half(in[k])))) << k;
  EXPECT_TRUE(std::isinf(float(half[1])));  // past f16's largest finite value
  EXPECT_TRUE(std::isnan(float(half[3])));
  const auto bf = vector_op<float, BFloat16>("vcvt.bf16.f32 r13, r10, r14", {1.00390625f, 1.01171875f});
  EXPECT_EQ(float(bf[0]), 1.0f);       // tie: to even
  EXPECT_EQ(float(bf[1]), 1.015625f);  // tie: to even (up)
}
TEST_F(Vcvt, FloatToIntegerTruncatesAndSaturates) {
  EXPECT_EQ((vector_op<float, int8_t>("vcvt.i8.f32 r13, r10, r14", {-2.7f, 2.7f, 300.0f, -300.0f, kNan})),
            (std::vector<int8_t>{-2, 2, 127, -128, 0}));
  EXPECT_EQ((vector_op<float, int64_t>("vcvt.i64.f32 r13, r10, r14", {1e30f, -1e30f})),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN}));
  EXPECT_EQ((vector_op<float, uint8_t>("vcvt.u8.f32 r13, r10, r14", {-1.0f, 255.9f})), (std::vector<uint8_t>{0, 255}));
}
TEST_F(Vcvt, IntegersSaturateAndBoolTestsForNonZero) {
  EXPECT_EQ((vector_op<int32_t, int8_t>("vcvt.i8.i32 r13, r10, r14", {1000, -1000, 5})),
            (std::vector<int8_t>{127, -128, 5}));
  EXPECT_EQ((vector_op<int64_t, uint8_t>("vcvt.u8.i64 r13, r10, r14", {-1, 256})), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ((vector_op<float, uint8_t>("vcvt.bool.f32 r13, r10, r14", {0.0f, -0.0f, 0.5f, kNan})),
            (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ((vector_op<uint8_t, float>("vcvt.f32.bool r13, r10, r14", {0, 1})), (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ((vector_op<int32_t, float>("vcvt.f32.i32 r13, r10, r14", {16777217})), (std::vector<float>{16777216.0f}));
}
TEST_F(Vcvt, F64IsConvertedToAndFromAsPyTorchConvertsFloat64) {
  // To f32 once, to nearest-even; to f16 and bf16 through f32 (1 + 2^-11 + 2^-40 rounds to f32's 1 + 2^-11, a tie
  // that f16 breaks to 1, where one rounding would give 1 + 2^-10: PyTorch's conversion rounds twice as well).
  const double tie_in_f32 = 1.0 + 0x1p-24 + 0x1p-50, tie_in_f16 = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ((vector_op<double, float>("vcvt.f32.f64 r13, r10, r14", {tie_in_f32, 1e39, -1e-50})),
            (std::vector<float>{1.0f + 0x1p-23f, INFINITY, -0.0f}));
  EXPECT_EQ(float(vector_op<double, Half>("vcvt.f16.f64 r13, r10, r14", {tie_in_f16})[0]), 1.0f);
  EXPECT_EQ((vector_op<float, double>("vcvt.f64.f32 r13, r10, r14", {0.1f, -3e38f})),
            (std::vector<double>{static_cast<double>(0.1f), static_cast<double>(-3e38f)}));
  // Integers round once; back to integers truncates and saturates, NaN giving 0, as from f32.
  EXPECT_EQ((vector_op<int64_t, double>("vcvt.f64.i64 r13, r10, r14", {(int64_t{1} << 53) + 1, INT64_MIN})),
            (std::vector<double>{0x1p53, -0x1p63}));
  EXPECT_EQ((vector_op<double, int64_t>("vcvt.i64.f64 r13, r10, r14", {9007199254740991.0, -2.9, 1e300, kNan})),
            (std::vector<int64_t>{9007199254740991, -2, INT64_MAX, 0}));
  EXPECT_EQ((vector_op<double, uint8_t>("vcvt.bool.f64 r13, r10, r14", {0.0, -0.0, 1e-320, kNan})),
            (std::vector<uint8_t>{0, 0, 1, 1}));
}
TEST_F(Vcvt, ConvertsInPlaceToAWiderType) {
  const auto out = tile("vcvt.f32.f16 r10, r10, r14\n fence\n vmov.f32 r13, r10, r14", 2, 8,
                        {bytes_of(std::vector<Half>{Half(0.5f), Half(-2.0f)})});
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{0.5f, -2.0f}));
}

// ---- unary functions. Special functions are within 1 ulp of the exact value (long double reference here).
int64_t ulp_distance(float a, float b) {
  const auto ordered = [](float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}
std::vector<float> sample_inputs(float low, float high) {
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(1000);
  for (float& value : values) value = uniform(random);
  return values;
}
// Runs a special function over 1000 random inputs in [low, high] and checks the worst error against `reference`
// (an expression of the long double x).
#define EXPECT_SPECIAL_WITHIN_ONE_ULP(mnemonic, low, high, reference)               \
  do {                                                                              \
    const std::vector<float> in = sample_inputs(low, high);                         \
    const auto out = vector_op<float>(mnemonic " r13, r10, r14", in);               \
    int64_t worst = 0;                                                              \
    for (size_t k = 0; k < in.size(); ++k) {                                        \
      const long double x = in[k];                                                  \
      worst = std::max(worst, ulp_distance(out[k], static_cast<float>(reference))); \
    }                                                                               \
    EXPECT_LE(worst, 1) << mnemonic;                                                \
  } while (false)

TEST_F(Vneg, NegatesAndWrapsIntegers) {
  const auto out = vector_op<float>("vneg.f32 r13, r10, r14", {0.0f, 1.5f});
  EXPECT_TRUE(std::signbit(out[0]));
  EXPECT_EQ(out[1], -1.5f);
  EXPECT_EQ((vector_op<int8_t>("vneg.i8 r13, r10, r14", {-128, 5})), (std::vector<int8_t>{-128, -5}));
}
TEST_F(Vabs, ClearsTheSign) {
  EXPECT_EQ(vector_op<float>("vabs.f32 r13, r10, r14", {-0.0f, -3.0f})[1], 3.0f);
  EXPECT_FALSE(std::signbit(vector_op<float>("vabs.f32 r13, r10, r14", {-0.0f})[0]));
  EXPECT_EQ((vector_op<int32_t>("vabs.i32 r13, r10, r14", {-7, INT32_MIN})), (std::vector<int32_t>{7, INT32_MIN}));
}
TEST_F(Vexp, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vexp.f32", -80.0f, 80.0f, std::exp(x));
  const auto edges = vector_op<float>("vexp.f32 r13, r10, r14", {-kInf, kInf, kNan, 100.0f});
  EXPECT_EQ(edges[0], 0.0f);
  EXPECT_EQ(edges[1], kInf);
  EXPECT_TRUE(std::isnan(edges[2]));
  EXPECT_EQ(edges[3], kInf);
  EXPECT_EQ(vector_op<BFloat16>("vexp.bf16 r13, r10, r14", {BFloat16(1.0f)})[0], BFloat16(std::exp(1.0f)));
}
TEST_F(Vlog, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vlog.f32", 1e-30f, 1e30f, std::log(x));
  const auto edges = vector_op<float>("vlog.f32 r13, r10, r14", {0.0f, -1.0f, 1e-45f});
  EXPECT_EQ(edges[0], -kInf);
  EXPECT_TRUE(std::isnan(edges[1]));
  EXPECT_EQ(edges[2], static_cast<float>(std::log(static_cast<double>(1e-45f))));  // a denormal input
}
TEST_F(Vtanh, MatchesReferenceWithinOneUlp) { EXPECT_SPECIAL_WITHIN_ONE_ULP("vtanh.f32", -10.0f, 10.0f, std::tanh(x)); }
TEST_F(Vsigmoid, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vsigmoid.f32", -30.0f, 30.0f, 1.0L / (1.0L + std::exp(-x)));
  const auto edges = vector_op<float>("vsigmoid.f32 r13, r10, r14", {-kInf, kInf});
  EXPECT_EQ(edges[0], 0.0f);
  EXPECT_EQ(edges[1], 1.0f);
}
TEST_F(Verf, MatchesReferenceWithinOneUlp) { EXPECT_SPECIAL_WITHIN_ONE_ULP("verf.f32", -5.0f, 5.0f, std::erf(x)); }
TEST_F(Vrsqrt, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vrsqrt.f32", 1e-30f, 1e30f, 1.0L / std::sqrt(x));
  EXPECT_EQ(vector_op<float>("vrsqrt.f32 r13, r10, r14", {0.0f})[0], kInf);
}
TEST_F(Vrecip, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vrecip.f32", -1e30f, 1e30f, 1.0L / x);
  EXPECT_EQ(vector_op<float>("vrecip.f32 r13, r10, r14", {-0.0f})[0], -kInf);
}
TEST_F(Vsqrt, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vsqrt.f32", 0.0f, 1e30f, std::sqrt(x));
  EXPECT_TRUE(std::isnan(vector_op<float>("vsqrt.f32 r13, r10, r14", {-1.0f})[0]));
}

TEST_F(Vsin, MatchesReferenceWithinOneUlp) { EXPECT_SPECIAL_WITHIN_ONE_ULP("vsin.f32", -100.0f, 100.0f, std::sin(x)); }
TEST_F(Vcos, MatchesReferenceWithinOneUlp) { EXPECT_SPECIAL_WITHIN_ONE_ULP("vcos.f32", -100.0f, 100.0f, std::cos(x)); }
TEST_F(Vlog1p, MatchesReferenceWithinOneUlpEvenNearZero) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vlog1p.f32", -0.999f, 1e6f, std::log1p(x));
  EXPECT_EQ(vector_op<float>("vlog1p.f32 r13, r10, r14", {1e-20f})[0], 1e-20f);  // log(1 + x) would give 0
  EXPECT_EQ(vector_op<float>("vlog1p.f32 r13, r10, r14", {-1.0f})[0], -kInf);
}
TEST_F(Vexpm1, MatchesReferenceWithinOneUlpEvenNearZero) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vexpm1.f32", -80.0f, 80.0f, std::expm1(x));
  EXPECT_EQ(vector_op<float>("vexpm1.f32 r13, r10, r14", {1e-20f})[0], 1e-20f);
}
// Halves, negative halves, signed zeros, large values (already integral), NaN and infinity.
const std::vector<float> kRoundingInputs = {2.5f, -2.5f, 3.5f, -0.4f, 0.7f, -0.0f, 1e20f, kInf, -kInf};
std::vector<float> rounded(const std::vector<float>& values, float (*function)(float)) {
  std::vector<float> result;
  for (float value : values) result.push_back(function(value));
  return result;
}
TEST_F(Vfloor, RoundsDown) {
  const auto out = vector_op<float>("vfloor.f32 r13, r10, r14", kRoundingInputs);
  EXPECT_EQ(out, rounded(kRoundingInputs, [](float x) { return std::floor(x); }));
  EXPECT_TRUE(std::signbit(out[5]));
  EXPECT_TRUE(std::isnan(vector_op<float>("vfloor.f32 r13, r10, r14", {kNan})[0]));
  EXPECT_EQ(vector_op<BFloat16>("vfloor.bf16 r13, r10, r14", {BFloat16(-1.5f)})[0], BFloat16(-2.0f));
}
TEST_F(Vceil, RoundsUp) {
  EXPECT_EQ(vector_op<float>("vceil.f32 r13, r10, r14", kRoundingInputs),
            rounded(kRoundingInputs, [](float x) { return std::ceil(x); }));
  EXPECT_TRUE(std::signbit(vector_op<float>("vceil.f32 r13, r10, r14", {-0.4f})[0]));  // -0, as C's ceil
}
TEST_F(Vround, RoundsHalvesToEven) {
  EXPECT_EQ(vector_op<float>("vround.f32 r13, r10, r14", kRoundingInputs),
            (std::vector<float>{2.0f, -2.0f, 4.0f, -0.0f, 1.0f, -0.0f, 1e20f, kInf, -kInf}));
  EXPECT_EQ(vector_op<Half>("vround.f16 r13, r10, r14", {Half(0.5f), Half(1.5f)}),
            (std::vector<Half>{Half(0.0f), Half(2.0f)}));
}
TEST_F(Vtrunc, RoundsTowardZero) {
  EXPECT_EQ(vector_op<float>("vtrunc.f32 r13, r10, r14", kRoundingInputs),
            rounded(kRoundingInputs, [](float x) { return std::trunc(x); }));
}

// ---- random numbers: r16 = key, r17 = the first element's stream position
// Philox4x32-10 of counter 0 under key 0 is (0x6627e8d5, 0xe169c58d, ...), Random123's first known-answer vector.
constexpr uint32_t kPhiloxZero0 = 0x6627e8d5, kPhiloxZero1 = 0xe169c58d;

TEST_F(Vrand, GivesRandom123sKnownAnswerOnTheTypesGrid) {
  const auto f32 = values_of<float>(tile("vrand.f32 r13, r0, r0, r14", 1, 4, {}));
  EXPECT_EQ(f32[0], std::ldexp(static_cast<float>(kPhiloxZero0 >> 8), -24));  // the top 24 bits over 2^24
  const auto bf16 = values_of<BFloat16>(tile("vrand.bf16 r13, r0, r0, r14", 1, 2, {}));
  EXPECT_EQ(static_cast<float>(bf16[0]), std::ldexp(static_cast<float>(kPhiloxZero0 >> 24), -8));
  const auto f16 = values_of<Half>(tile("vrand.f16 r13, r0, r0, r14", 1, 2, {}));
  EXPECT_EQ(static_cast<float>(f16[0]), std::ldexp(static_cast<float>(kPhiloxZero0 >> 21), -11));
}
TEST_F(Vrand, DependsOnlyOnKeyAndPosition) {
  // Drawn as one run of 64 from position 2^32 - 8 (across the counter's word boundary) or element by element:
  // the same numbers, so a kernel's tiling and core count do not change them.
  const std::string key = "li r16, 12345\n lhi r16, 7\n li r17, -8\n lhi r17, 0\n";
  const auto whole = values_of<float>(tile(key + "vrand.f32 r13, r16, r17, r14", 64, 256, {}));
  for (int k = 0; k < 64; k += 13) {
    const auto one =
        values_of<float>(tile(key + fmt::format("addi r17, r17, {}\n vrand.f32 r13, r16, r17, r14", k), 1, 4, {}));
    EXPECT_EQ(one[0], whole[k]) << k;
  }
  const auto other_key = values_of<float>(
      tile("li r16, 12346\n lhi r16, 7\n li r17, -8\n lhi r17, 0\n vrand.f32 r13, r16, r17, r14", 64, 256, {}));
  EXPECT_NE(other_key, whole);
}
TEST_F(Vrand, IsUniformInTheHalfOpenUnitInterval) {
  const auto values = values_of<float>(tile("li r16, 99\n vrand.f32 r13, r16, r0, r14", 1024, 4096, {}));
  double sum = 0;
  for (float value : values) {
    EXPECT_GE(value, 0.0f);
    EXPECT_LT(value, 1.0f);
    sum += value;
  }
  // 1024 uniforms: the mean's standard deviation is 1 / sqrt(12 * 1024) = 0.009; allow 5 of them.
  EXPECT_NEAR(sum / 1024, 0.5, 0.045);
}
TEST_F(Vrandn, IsBoxMullerOfTheFirstTwoWords) {
  const auto out = values_of<float>(tile("vrandn.f32 r13, r0, r0, r14", 1, 4, {}));
  const double u1 = std::ldexp(static_cast<double>((kPhiloxZero0 >> 8) + 1), -24);
  const double u2 = std::ldexp(static_cast<double>(kPhiloxZero1 >> 8), -24);
  EXPECT_EQ(out[0], static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2)));
}
TEST_F(Vrandn, HasZeroMeanAndUnitVariance) {
  const auto values =
      values_of<float>(tile("li r16, 7\n li r17, 1000\n vrandn.f32 r13, r16, r17, r14", 1024, 4096, {}));
  double sum = 0, squares = 0;
  for (float value : values) {
    EXPECT_TRUE(std::isfinite(value));
    sum += value;
    squares += static_cast<double>(value) * value;
  }
  // Over 1024 samples the mean's standard deviation is 1/32 and the variance's sqrt(2/1024) = 0.044: 5 of each.
  EXPECT_NEAR(sum / 1024, 0.0, 0.16);
  EXPECT_NEAR(squares / 1024 - (sum / 1024) * (sum / 1024), 1.0, 0.22);
}

// ---- row reductions: r15 rows of r14 columns
TEST_F(Vrsum, SumsEachRowInColumnOrder) {
  const std::vector<float> in = {1e8f, 1.0f, -1e8f, 1.0f, 2.0f, 3.0f};
  const auto out = values_of<float>(tile("vrsum.f32 r13, r10, r15, r14", 3, 8, {bytes_of(in)}, 2));
  EXPECT_EQ(out, (std::vector<float>{(1e8f + 1.0f) - 1e8f, 6.0f}));  // the 1 is lost, as in sequential f32 sums
  const auto ints = values_of<int32_t>(
      tile("vrsum.i32 r13, r10, r15, r14", 2, 8, {bytes_of(std::vector<int32_t>{INT32_MAX, 1, -5, 2})}, 2));
  EXPECT_EQ(ints, (std::vector<int32_t>{INT32_MIN, -3}));
  // 64-bit sums wrap too (they overflowed a signed accumulator, undefined behaviour UBSan found)
  const auto longs =
      values_of<int64_t>(tile("vrsum.i64 r13, r10, r15, r14", 2, 8, {bytes_of(std::vector<int64_t>{INT64_MAX, 2})}, 1));
  EXPECT_EQ(longs, (std::vector<int64_t>{INT64_MIN + 1}));
}
// A tile of no rows is empty whatever its width: a fuzzed kernel whose width was an address (2^64 - 1 here) made the
// emulator allocate a row of that many elements for each such instruction.
TEST_F(Vrsum, NoRowsOfAnyWidthDoNothing) {
  EXPECT_FALSE(
      run("li r14, 0\n li r15, -1\n vrsum.f32 r13, r10, r14, r15\n vrmax.i64 r13, r10, r14, r15\n"
          " vargmin.bf16 r13, r10, r14, r15\n halt\n"));
}
// Rows of no columns are bounded by their results' place in the scratchpad, checked before anything is allocated: the
// fuzzer's 2^64 - 1 rows threw std::length_error from a core's thread, which ended the process.
TEST_F(Vrsum, ManyRowsOfNoColumnsTrapOnTheirResults) {
  const auto fault = run("li r14, 0\n li r15, -1\n vrsum.f16 r13, r10, r15, r14\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_NE(fault->instruction.find("vrsum"), std::string::npos) << fault->describe();
}
TEST_F(Vrmax, PropagatesNan) {
  const std::vector<float> in = {1.0f, 5.0f, 2.0f, kNan, 0.0f, 1.0f};
  const auto out = values_of<float>(tile("vrmax.f32 r13, r10, r15, r14", 3, 8, {bytes_of(in)}, 2));
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_TRUE(std::isnan(out[1]));
}
TEST_F(Vrmin, TakesTheSmallest) {
  const auto out =
      values_of<int8_t>(tile("vrmin.i8 r13, r10, r15, r14", 2, 2, {bytes_of(std::vector<int8_t>{3, -4, 7, 7})}, 2));
  EXPECT_EQ(out, (std::vector<int8_t>{-4, 7}));
}
TEST_F(Vargmax, GivesTheFirstIndexAsI64AndNanWins) {
  const std::vector<float> in = {1.0f, 5.0f, 5.0f, 2.0f, kNan, 9.0f};
  const auto out = values_of<int64_t>(tile("vargmax.f32 r13, r10, r15, r14", 3, 16, {bytes_of(in)}, 2));
  EXPECT_EQ(out, (std::vector<int64_t>{1, 1}));
}
TEST_F(Vargmin, GivesTheFirstIndexAsI64) {
  const std::vector<Half> in = {Half(3.0f), Half(-1.0f), Half(-1.0f)};
  EXPECT_EQ(values_of<int64_t>(tile("vargmin.f16 r13, r10, r15, r14", 3, 8, {bytes_of(in)}, 1)),
            (std::vector<int64_t>{1}));
}

}  // namespace npusim::emulator::semantics_test
