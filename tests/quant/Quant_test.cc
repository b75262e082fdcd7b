// Dequantization / quantization against ggml's goldens (tests/data/quant, copied from
// ../shared/fixtures/quant: 8 rows x 256 f32, quantized and dequantized by llama.cpp's ggml-base),
// plus round-trip error bounds, exhaustive half / bf16 conversion checks and error cases.
#include "kernels/formats/Quant.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "kernels/formats/QuantInternal.h"
#include "tests/TestUtil.h"

namespace memra::formats {
namespace {

using memra::testing::ReadF32File;
using memra::testing::ReadFileBytes;
using memra::testing::TestDataPath;

constexpr int kRows = 8;
constexpr int kCols = 256;

// Every type with goldens, and those whose .raw came from a reference quantizer we reproduce (all
// of them: ggml_quantize_chunk without imatrix is quantize_row_*_ref; gguf-py agrees with ggml on
// the legacy types, f16, bf16 and mxfp4).
// iq4_nl / iq4_xs come from the same ggml call, made by a harness outside the repository (index.json's
// "made_by"); gguf-py has no quantizer for them.
const char* const kGoldenTypes[] = {"f16",  "bf16", "q8_0", "q4_0", "q4_1",  "q5_0",  "q5_1",   "q2_K",
                                    "q3_K", "q4_K", "q5_K", "q6_K", "mxfp4", "nvfp4", "iq4_nl", "iq4_xs"};
const char* const kQuantizableGoldenTypes[] = {"f16",  "bf16", "q8_0", "q4_0", "q4_1",  "q5_0",  "q5_1",   "q2_K",
                                               "q3_K", "q4_K", "q5_K", "q6_K", "mxfp4", "nvfp4", "iq4_nl", "iq4_xs"};

std::string Hex32(float f) { return absl::StrFormat("0x%08x", std::bit_cast<uint32_t>(f)); }

// Bitwise comparison (NaN equals NaN of the same bits); reports the first mismatch.
::testing::AssertionResult SameBits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) {
      if (mismatches++ == 0) first = i;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << got.size() << " values differ; first at index "
                                       << first << " (row " << first / kCols << ", col " << first % kCols << "): got "
                                       << got[first] << " (" << Hex32(got[first]) << "), ggml " << want[first] << " ("
                                       << Hex32(want[first]) << ")";
}

::testing::AssertionResult SameBytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                                     size_t block_bytes) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "first differing byte " << i << " (block " << i / block_bytes << ", byte " << i % block_bytes
             << "): got 0x" << absl::StrFormat("%02x", got[i]) << ", ggml 0x" << absl::StrFormat("%02x", want[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

GgmlType TypeNamed(const std::string& name) {
  auto t = ParseGgmlType(name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : GgmlType::kF32;
}

// ---------------------------------------------------------------------------------------------
// Goldens.

// The integer after `"key": ` following position `from` in index.json (a flat, known layout; this
// avoids LLVM 14's JSON header, which clang cannot compile in C++20 mode).
int64_t JsonIntAfter(const std::string& json, size_t from, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = json.find(needle, from);
  if (at == std::string::npos) return -1;
  return std::strtoll(json.c_str() + at + needle.size(), nullptr, 10);
}

TEST(QuantGolden, IndexMatchesTypeTable) {
  auto bytes = ReadFileBytes(TestDataPath("quant/index.json"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string json(bytes->begin(), bytes->end());
  EXPECT_EQ(JsonIntAfter(json, 0, "rows"), kRows);
  EXPECT_EQ(JsonIntAfter(json, 0, "cols"), kCols);
  for (const char* name : kGoldenTypes) {
    SCOPED_TRACE(name);
    const size_t at = json.find("\"" + std::string(name) + "\": {");
    ASSERT_NE(at, std::string::npos);
    const GgmlTypeTraits& traits = TraitsOf(TypeNamed(name));
    EXPECT_EQ(JsonIntAfter(json, at, "ggml_type_id"), static_cast<int64_t>(traits.type));
    EXPECT_EQ(JsonIntAfter(json, at, "block_elems"), traits.block_elems);
    EXPECT_EQ(JsonIntAfter(json, at, "block_bytes"), traits.block_bytes);
    EXPECT_TRUE(CanDequantize(traits.type));
  }
}

class DequantGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(DequantGolden, BitExactWithGgml) {
  const std::string name = GetParam();
  const GgmlType type = TypeNamed(name);
  auto raw = ReadFileBytes(TestDataPath("quant/" + name + ".raw"));
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto want = ReadF32File(TestDataPath("quant/" + name + ".dequant.f32"));
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), static_cast<size_t>(kRows * kCols));

  // The whole matrix at once, and row by row (rows are independent).
  std::vector<float> got(want->size());
  ASSERT_TRUE(Dequantize(type, *raw, absl::MakeSpan(got)).ok());
  EXPECT_TRUE(SameBits(got, *want));

  const size_t row_bytes = raw->size() / kRows;
  std::vector<float> by_row(want->size());
  for (int r = 0; r < kRows; ++r) {
    ASSERT_TRUE(Dequantize(type, absl::MakeConstSpan(raw->data() + r * row_bytes, row_bytes),
                           absl::MakeSpan(by_row.data() + r * kCols, kCols))
                    .ok());
  }
  EXPECT_TRUE(SameBits(by_row, *want));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantGolden, ::testing::ValuesIn(kGoldenTypes),
                         [](const auto& info) { return std::string(info.param); });

class QuantGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantGolden, BitExactWithGgmlReferenceQuantizer) {
  const std::string name = GetParam();
  const GgmlType type = TypeNamed(name);
  ASSERT_TRUE(CanQuantize(type));
  auto src = ReadF32File(TestDataPath("quant/source.f32"));
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ(src->size(), static_cast<size_t>(kRows * kCols));
  auto want = ReadFileBytes(TestDataPath("quant/" + name + ".raw"));
  ASSERT_TRUE(want.ok()) << want.status();

  std::vector<uint8_t> got(want->size());
  ASSERT_TRUE(Quantize(type, *src, absl::MakeSpan(got)).ok());
  EXPECT_TRUE(SameBytes(got, *want, TraitsOf(type).block_bytes));
}

INSTANTIATE_TEST_SUITE_P(QuantizableTypes, QuantGolden, ::testing::ValuesIn(kQuantizableGoldenTypes),
                         [](const auto& info) { return std::string(info.param); });

// ---------------------------------------------------------------------------------------------
// Round trips on random data: quantize -> dequantize stays within the format's error bound.

struct RoundTripCase {
  const char* name;
  // Largest allowed |x - x'| for an element of a block, given the block's max |x|, its range
  // (max - min) and the element itself.
  double (*bound)(double amax, double range, double x);
  // Rows are N(0, 1) scaled by 2^U(min_exp, max_exp).
  float min_exp = -8, max_exp = 12;
};

constexpr double kHalfEps = 0x1p-11;  // unit roundoff of f16 (scales and values stored as f16)
constexpr double kHalfSub = 0x1p-25;  // half the f16 subnormal spacing (absolute rounding floor)

const RoundTripCase kRoundTrips[] = {
    {"f32", [](double, double, double) { return 0.0; }},
    {"f16", [](double, double, double x) { return std::fabs(x) * kHalfEps * 1.0001 + kHalfSub; }},
    {"bf16", [](double, double, double x) { return std::fabs(x) * 0x1p-8 * 1.0001 + 1e-40; }},
    // symmetric: q * d, d = amax / 127 rounded to f16 (which moves q * d by up to 127 d eps)
    {"q8_0", [](double amax, double, double) { return amax * (0.5 / 127 + kHalfEps) * 1.001 + 127 * kHalfSub; }},
    {"q8_1", [](double amax, double, double) { return amax * (0.5 / 127 + kHalfEps) * 1.001 + 127 * kHalfSub; }},
    // d = max / -8: the opposite extreme clips to 7|d| (error up to |d|), others round to |d|/2
    {"q4_0", [](double amax, double, double) { return amax * (1.0 / 8 + 8 * kHalfEps) * 1.001 + 8 * kHalfSub; }},
    {"q5_0", [](double amax, double, double) { return amax * (1.0 / 16 + 16 * kHalfEps) * 1.001 + 16 * kHalfSub; }},
    // asymmetric: min + q * (range / (2^b - 1)); d and min are f16
    {"q4_1", [](double amax, double range,
                double) { return (range / 30 + (range + amax) * kHalfEps) * 1.001 + 16 * kHalfSub; }},
    {"q5_1", [](double amax, double range,
                double) { return (range / 62 + (range + amax) * kHalfEps) * 1.001 + 32 * kHalfSub; }},
    // grid kv * 2^(floor(log2 amax) - 3), kv up to 12: the clip above 1.5 * 2^floor(log2 amax) or
    // half the widest gap (8 -> 12), both at most 2^(floor(log2 amax) - 1)
    {"mxfp4", [](double amax, double, double) { return std::ldexp(1.0, std::ilogb(amax) - 1) * 1.001; }},
    // scale ue4m3(amax / 6) / 2 (3 mantissa bits): half the widest gap is ~amax / 6, plus the
    // scale's rounding. UE4M3 spans 2^-9 .. 448, so the data stays inside its range.
    {"nvfp4", [](double amax, double, double) { return amax * 0.25; }, -2, 8},
};

TEST(QuantRoundTrip, ErrorWithinBounds) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const RoundTripCase& c : kRoundTrips) {
    SCOPED_TRACE(c.name);
    std::uniform_real_distribution<float> scale_exp(c.min_exp, c.max_exp);
    const GgmlType type = TypeNamed(c.name);
    ASSERT_TRUE(CanQuantize(type));
    ASSERT_TRUE(CanDequantize(type));
    const GgmlTypeTraits& t = TraitsOf(type);
    // 64 rows of 256, each row with its own scale; a few all-positive rows,
    // one all-zero row and one constant row.
    const int rows = 64, cols = 256;
    std::vector<float> x(rows * cols);
    for (int r = 0; r < rows; ++r) {
      const float s = std::exp2(scale_exp(rng));
      for (int i = 0; i < cols; ++i) {
        float v = normal(rng) * s;
        if (r % 8 == 5) v = std::fabs(v) + s;
        if (r == 7) v = 0.0f;
        if (r == 15) v = 0.75f * s;
        x[r * cols + i] = v;
      }
    }
    std::vector<uint8_t> q(rows * cols / t.block_elems * t.block_bytes);
    ASSERT_TRUE(Quantize(type, x, absl::MakeSpan(q)).ok());
    std::vector<float> y(x.size());
    ASSERT_TRUE(Dequantize(type, q, absl::MakeSpan(y)).ok());
    const int be = t.block_elems == 1 ? 32 : static_cast<int>(t.block_elems);
    int failures = 0;
    for (size_t b0 = 0; b0 < x.size(); b0 += be) {
      double amax = 0, mn = x[b0], mx = x[b0];
      for (int i = 0; i < be; ++i) {
        const double v = x[b0 + i];
        amax = std::max(amax, std::fabs(v));
        mn = std::min(mn, v);
        mx = std::max(mx, v);
      }
      for (int i = 0; i < be; ++i) {
        const double v = x[b0 + i];
        const double err = std::fabs(static_cast<double>(y[b0 + i]) - v);
        const double bound = c.bound(amax, mx - mn, v);
        if (!(err <= bound) && failures++ < 5)
          ADD_FAILURE() << "element " << b0 + i << ": x " << v << " -> " << y[b0 + i] << ", |err| " << err
                        << " > bound " << bound << " (block amax " << amax << ")";
      }
    }
    EXPECT_EQ(failures, 0);
  }
}

TEST(QuantRoundTrip, ZeroBlocksStayZero) {
  std::vector<std::string> names;
  for (const RoundTripCase& c : kRoundTrips) names.push_back(c.name);
  for (const char* k : {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"}) names.push_back(k);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const GgmlType type = TypeNamed(name);
    const GgmlTypeTraits& t = TraitsOf(type);
    std::vector<float> x(256, 0.0f);
    std::vector<uint8_t> q(256 / t.block_elems * t.block_bytes, 0xAB);
    ASSERT_TRUE(Quantize(type, x, absl::MakeSpan(q)).ok());
    std::vector<float> y(256, 1.0f);
    ASSERT_TRUE(Dequantize(type, q, absl::MakeSpan(y)).ok());
    for (float v : y) ASSERT_EQ(v, 0.0f);
  }
}

// K-quants fit their scales by search, so bound the error statistically: relative RMS error per
// 256-element row well under the format's typical level (index.json's nmse on the goldens), and
// no element off by more than half the row's max |x|.
TEST(QuantRoundTrip, KQuantErrorWithinBounds) {
  const struct {
    const char* name;
    double max_rel_rms;
  } cases[] = {{"q2_K", 0.40},  {"q3_K", 0.22},   {"q4_K", 0.10},  {"q5_K", 0.05},
               {"q6_K", 0.025}, {"iq4_nl", 0.10}, {"iq4_xs", 0.10}};
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale_exp(-8.0f, 12.0f);
  const int rows = 32, cols = 256;
  std::vector<float> x(rows * cols);
  for (int r = 0; r < rows; ++r) {
    const float s = std::exp2(scale_exp(rng));
    for (int i = 0; i < cols; ++i) x[r * cols + i] = r % 4 == 3 ? std::fabs(normal(rng)) * s + s : normal(rng) * s;
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const GgmlType type = TypeNamed(c.name);
    const GgmlTypeTraits& t = TraitsOf(type);
    std::vector<uint8_t> q(rows * cols / t.block_elems * t.block_bytes);
    ASSERT_TRUE(Quantize(type, x, absl::MakeSpan(q)).ok());
    std::vector<float> y(x.size());
    ASSERT_TRUE(Dequantize(type, q, absl::MakeSpan(y)).ok());
    for (int r = 0; r < rows; ++r) {
      double err2 = 0, ref2 = 0, amax = 0, max_err = 0;
      for (int i = 0; i < cols; ++i) {
        const double v = x[r * cols + i], e = y[r * cols + i] - v;
        err2 += e * e;
        ref2 += v * v;
        amax = std::max(amax, std::fabs(v));
        max_err = std::max(max_err, std::fabs(e));
      }
      EXPECT_LE(std::sqrt(err2 / ref2), c.max_rel_rms) << "row " << r;
      EXPECT_LE(max_err, 0.5 * amax) << "row " << r;
    }
  }
}

// Values that sit exactly on the quantization grid survive a round trip unchanged.
TEST(QuantRoundTrip, GridValuesAreExact) {
  // q8_0: amax 127 -> d = 1, every integer in [-127, 127] is exact.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i * 8 - 127 + (i == 31 ? 6 : 0));
  x[0] = -127.0f;
  std::vector<uint8_t> q(34);
  ASSERT_TRUE(Quantize(GgmlType::kQ8_0, x, absl::MakeSpan(q)).ok());
  std::vector<float> y(32);
  ASSERT_TRUE(Dequantize(GgmlType::kQ8_0, q, absl::MakeSpan(y)).ok());
  EXPECT_EQ(x, y);
  // mxfp4: the doubled E2M1 values times 2^k.
  const float fp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.5f, -1, -1.5f, -2, -3, -4, -6, 0};
  for (int i = 0; i < 32; ++i) x[i] = fp4[i % 16] * 64.0f;
  q.resize(17);
  ASSERT_TRUE(Quantize(GgmlType::kMXFP4, x, absl::MakeSpan(q)).ok());
  ASSERT_TRUE(Dequantize(GgmlType::kMXFP4, q, absl::MakeSpan(y)).ok());
  EXPECT_EQ(x, y);
}

// ---------------------------------------------------------------------------------------------
// Hand-made blocks for formats without goldens and for scale edge cases.

TEST(QuantBlocks, Q8_1) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i) - 10.0f;  // amax 21
  std::vector<uint8_t> q(36);
  ASSERT_TRUE(Quantize(GgmlType::kQ8_1, x, absl::MakeSpan(q)).ok());
  uint16_t d_bits, s_bits;
  std::memcpy(&d_bits, q.data(), 2);
  std::memcpy(&s_bits, q.data() + 2, 2);
  const float d = HalfToFloat(d_bits);
  EXPECT_EQ(d_bits, FloatToHalf(21.0f / 127.0f));
  int sum = 0;
  for (int i = 0; i < 32; ++i) sum += static_cast<int8_t>(q[4 + i]);
  EXPECT_EQ(s_bits, FloatToHalf(static_cast<float>(sum) * (21.0f / 127.0f)));
  std::vector<float> y(32);
  ASSERT_TRUE(Dequantize(GgmlType::kQ8_1, q, absl::MakeSpan(y)).ok());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], static_cast<float>(static_cast<int8_t>(q[4 + i])) * d);
}

TEST(QuantBlocks, Q8_K) {
  std::vector<uint8_t> block(292, 0);
  const float d = 0.375f;
  std::memcpy(block.data(), &d, 4);
  for (int i = 0; i < 256; ++i) block[4 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 128));
  std::vector<float> y(256);
  ASSERT_TRUE(Dequantize(GgmlType::kQ8_K, block, absl::MakeSpan(y)).ok());
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], d * static_cast<float>(i - 128));
}

TEST(QuantBlocks, MXFP4ScaleBytes) {
  // e = 128 -> scale 2^0 for the doubled values, i.e. the true E2M1 value halves them back.
  std::vector<uint8_t> block(17, 0);
  block[1] = 0x7f;  // element 0: code 15 (-12), element 16: code 7 (12)
  std::vector<float> y(32);
  for (int e : {0, 1, 2, 127, 128, 200, 254}) {
    block[0] = static_cast<uint8_t>(e);
    ASSERT_TRUE(Dequantize(GgmlType::kMXFP4, block, absl::MakeSpan(y)).ok());
    const float scale = static_cast<float>(std::ldexp(1.0, e - 128));
    EXPECT_EQ(y[0], -12.0f * scale) << e;
    EXPECT_EQ(y[16], 12.0f * scale) << e;
    EXPECT_EQ(y[1], 0.0f);
  }
}

TEST(QuantBlocks, NVFP4ScaleBytes) {
  // Sub-block s has scale byte d[s]; qs[8s] = 0x71 -> element 16s: code 1 (1), 16s+8: code 7 (12).
  std::vector<uint8_t> block(36, 0);
  for (int s = 0; s < 4; ++s) block[4 + 8 * s] = 0x71;
  struct Case {
    uint8_t code;
    float half_value;  // ggml_ue4m3_to_fp32: half the UE4M3 value
  } cases[] = {
      {0x00, 0.0f},                // zero
      {0x7f, 0.0f},                // the NaN code reads as 0
      {0x01, 0x1p-9f * 0.5f},      // smallest subnormal, 1 * 2^-9
      {0x07, 7 * 0x1p-9f * 0.5f},  // largest subnormal
      {0x08, 0x1p-6f * 0.5f},      // smallest normal
      {0x38, 0.5f},                // 1.0
      {0x7e, 448.0f * 0.5f},       // largest finite E4M3
      {0x80, 0.0f},                // bit 7 ignored: like 0x00 ... except that only 0x00 and
                                   // 0x7f are special; exp 0 man 0 = 0 anyway
      {0xb8, 0.5f},                // bit 7 ignored: like 0x38
      {0xff, 480.0f * 0.5f},       // exp 15 man 7 is decoded as a number (not special)
  };
  std::vector<float> y(64);
  for (const Case& c : cases) {
    for (int s = 0; s < 4; ++s) block[s] = s == 2 ? c.code : 0x38;
    ASSERT_TRUE(Dequantize(GgmlType::kNVFP4, block, absl::MakeSpan(y)).ok());
    EXPECT_EQ(y[32], 1.0f * c.half_value) << absl::StrFormat("code 0x%02x", c.code);
    EXPECT_EQ(y[40], 12.0f * c.half_value) << absl::StrFormat("code 0x%02x", c.code);
    EXPECT_EQ(y[0], 0.5f);
    EXPECT_EQ(y[8], 6.0f);
  }
}

// IQ4_XS: sub-block s has the 6-bit scale ls (low nibble in scales_l[s/2], top 2 bits in scales_h
// bits 2s..2s+1) and x = d * (ls - 32) * level[code].
TEST(QuantBlocks, IQ4XSScalesAndLevels) {
  std::vector<uint8_t> block(136, 0);
  const uint16_t d_bits = FloatToHalf(0.25f);
  std::memcpy(block.data(), &d_bits, 2);
  const int ls[8] = {0, 9, 18, 31, 32, 33, 50, 63};
  uint16_t scales_h = 0;
  for (int s = 0; s < 8; ++s) {
    block[4 + s / 2] |= static_cast<uint8_t>((ls[s] & 0xf) << (4 * (s % 2)));
    scales_h |= static_cast<uint16_t>((ls[s] >> 4) << (2 * s));
  }
  std::memcpy(block.data() + 2, &scales_h, 2);
  // Sub-block s, byte j: low nibble (element j) code (j + s) % 16, high nibble (element j + 16) 15 - j.
  for (int s = 0; s < 8; ++s)
    for (int j = 0; j < 16; ++j) block[8 + 16 * s + j] = static_cast<uint8_t>(((j + s) % 16) | ((15 - j) << 4));
  std::vector<float> y(256);
  ASSERT_TRUE(Dequantize(GgmlType::kIQ4_XS, block, absl::MakeSpan(y)).ok());
  for (int s = 0; s < 8; ++s) {
    const float dl = 0.25f * static_cast<float>(ls[s] - 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[32 * s + j], dl * quant_internal::kIQ4NLValues[(j + s) % 16]) << s << " " << j;
      EXPECT_EQ(y[32 * s + 16 + j], dl * quant_internal::kIQ4NLValues[15 - j]) << s << " " << j;
    }
  }
}

// Data on the non-linear grid (levels times a power of two) survives both formats exactly: the
// least-squares scale is exactly the grid's, and IQ4_XS's 6-bit scale -32 maps back to it.
TEST(QuantBlocks, IQ4GridValuesAreExact) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = 0.5f * quant_internal::kIQ4NLValues[(i * 7) % 16];
  for (GgmlType t : {GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    SCOPED_TRACE(GgmlTypeName(t));
    std::vector<uint8_t> q(256 / TraitsOf(t).block_elems * TraitsOf(t).block_bytes);
    ASSERT_TRUE(Quantize(t, x, absl::MakeSpan(q)).ok());
    std::vector<float> y(256);
    ASSERT_TRUE(Dequantize(t, q, absl::MakeSpan(y)).ok());
    EXPECT_EQ(x, y);
  }
}

TEST(QuantBlocks, Fp4CodesDecodeLikeTheTable) {
  for (uint32_t c = 0; c < 16; ++c) {
    const float want = static_cast<float>(quant_internal::kFp4Values[c]);
    EXPECT_EQ(std::bit_cast<uint32_t>(quant_internal::Fp4Value(c)), std::bit_cast<uint32_t>(want)) << c;
  }
}

// Non-finite inputs follow ggml's reference quantizer as compiled for x86 (its C casts of NaN give
// 0): an inf makes d inf and every quant 0; a NaN is skipped by the running max unless it is last.
TEST(QuantBlocks, Q8_0NonFiniteInputs) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i) - 16.0f;  // amax 16
  std::vector<uint8_t> q(34);
  auto d_bits = [&] { return static_cast<uint16_t>(q[0] | (q[1] << 8)); };

  std::vector<float> xi = x;
  xi[5] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(Quantize(GgmlType::kQ8_0, xi, absl::MakeSpan(q)).ok());
  EXPECT_EQ(d_bits(), 0x7c00);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[2 + i], 0) << i;

  std::vector<float> xn = x;
  xn[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(Quantize(GgmlType::kQ8_0, xn, absl::MakeSpan(q)).ok());
  EXPECT_EQ(d_bits(), FloatToHalf(15.0f / 127.0f));
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 31]), 127);

  xn = x;
  xn[31] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(Quantize(GgmlType::kQ8_0, xn, absl::MakeSpan(q)).ok());
  EXPECT_EQ(d_bits(), 0x7e00);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[2 + i], 0) << i;
}

// ---------------------------------------------------------------------------------------------
// Scalar conversions.

bool IsHalfNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }

TEST(HalfConversion, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (IsHalfNan(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_EQ(FloatToHalf(f), (h & 0x8000) | 0x7e00) << h;  // ggml's canonical NaN, sign kept
    } else {
      ASSERT_EQ(FloatToHalf(f), h) << absl::StrFormat("half 0x%04x -> %g", h, f);
    }
  }
}

TEST(HalfConversion, ExhaustiveValues) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hb = static_cast<uint16_t>(h);
    const float f = HalfToFloat(hb);
    const int sign = (h >> 15) ? -1 : 1;
    const int exp = (h >> 10) & 31;
    const int man = h & 1023;
    if (exp == 31) {
      if (man == 0) {
        ASSERT_EQ(f, sign * std::numeric_limits<float>::infinity());
      } else {
        // NaN: payload kept (shifted up), quiet bit set.
        ASSERT_EQ(std::bit_cast<uint32_t>(f), ((h & 0x8000u) << 16) | 0x7fc00000u | (static_cast<uint32_t>(man) << 13));
      }
      continue;
    }
    const double want = exp == 0 ? sign * std::ldexp(man, -24) : sign * std::ldexp(1024 + man, exp - 25);
    ASSERT_EQ(static_cast<double>(f), want) << h;
    ASSERT_EQ(std::signbit(f), sign < 0) << h;
  }
}

TEST(HalfConversion, RoundingAndSpecials) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.996f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie to even rounds up to infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::quiet_NaN()), 0xfe00);
  EXPECT_EQ(FloatToHalf(std::bit_cast<float>(0x7f800001u)), 0x7e00);  // signalling NaN
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3c00);                    // tie -> even (down)
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);                // tie -> even (up)
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);         // above the tie
  EXPECT_EQ(FloatToHalf(0x1p-14f), 0x0400);                           // smallest normal
  EXPECT_EQ(FloatToHalf(0x1p-14f - 0x1p-25f), 0x0400);                // rounds up into normals
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);                           // smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);                           // tie -> even (zero)
  EXPECT_EQ(FloatToHalf(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(FloatToHalf(3 * 0x1p-25f), 0x0002);   // tie -> even (up)
  EXPECT_EQ(FloatToHalf(-5 * 0x1p-25f), 0x8002);  // tie -> even (down)
  EXPECT_EQ(FloatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(FloatToHalf(-1e-30f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * 0x1p-24f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(std::bit_cast<uint32_t>(HalfToFloat(0x7c01)), 0x7fc02000u);  // sNaN comes back quiet
}

// Every float rounds to the nearest half (ties to even): check by brute force around each half.
TEST(HalfConversion, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = bits(rng);
    // Concentrate on the half range: exponents 98..143 (subnormal halves to overflow).
    if (i % 4 != 0) u = (u & 0x807fffffu) | ((98u + (u >> 23) % 46u) << 23);
    const float f = std::bit_cast<float>(u);
    if (std::isnan(f)) continue;
    const uint16_t h = FloatToHalf(f);
    const double v = f;
    const double got = HalfToFloat(h);
    if (std::isinf(got)) {
      ASSERT_GE(std::fabs(v), 65520.0) << Hex32(f);
      continue;
    }
    // Neighbours of h (same sign) must not be closer; on an exact tie h must be even.
    const double err = std::fabs(got - v);
    for (int delta : {-1, 1}) {
      const int nb = (h & 0x7fff) + delta;
      if (nb < 0 || nb > 0x7bff) continue;
      const double other = HalfToFloat(static_cast<uint16_t>((h & 0x8000) | nb));
      const double oerr = std::fabs(other - v);
      ASSERT_LE(err, oerr) << Hex32(f);
      if (err == oerr) {
        ASSERT_EQ(h & 1, 0) << "tie not to even: " << Hex32(f);
      }
    }
  }
}

#if defined(__FLT16_MANT_DIG__)
// Cross-check against the compiler's own _Float16 conversions (IEEE round to nearest even).
TEST(HalfConversion, MatchesCompilerFloat16) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t u = bits(rng);
    if (i % 2) u = (u & 0x807fffffu) | ((98u + (u >> 23) % 46u) << 23);
    const float f = std::bit_cast<float>(u);
    if (std::isnan(f)) continue;
    const _Float16 c = static_cast<_Float16>(f);
    ASSERT_EQ(FloatToHalf(f), std::bit_cast<uint16_t>(c)) << Hex32(f);
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    if (IsHalfNan(static_cast<uint16_t>(h))) continue;
    const float c = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    ASSERT_EQ(std::bit_cast<uint32_t>(HalfToFloat(static_cast<uint16_t>(h))), std::bit_cast<uint32_t>(c));
  }
}
#endif

TEST(Bf16Conversion, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    const bool nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    ASSERT_EQ(FloatToBf16(f), nan ? (b | 0x40) : b) << b;  // NaNs come back quiet
  }
}

TEST(Bf16Conversion, RoundingAndSpecials) {
  auto bf = [](uint32_t u) { return FloatToBf16(std::bit_cast<float>(u)); };
  EXPECT_EQ(bf(0x3f800000u), 0x3f80);
  EXPECT_EQ(bf(0x3f808000u), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(bf(0x3f818000u), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(bf(0x3f808001u), 0x3f81);
  EXPECT_EQ(bf(0x3f807fffu), 0x3f80);
  EXPECT_EQ(bf(0x7f7fffffu), 0x7f80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(bf(0xff7fffffu), 0xff80);
  EXPECT_EQ(bf(0x7f800000u), 0x7f80);  // inf
  EXPECT_EQ(bf(0x7f800001u), 0x7fc0);  // sNaN with low payload -> quiet NaN
  EXPECT_EQ(bf(0x7fc00000u), 0x7fc0);
  EXPECT_EQ(bf(0xffa12345u), 0xffe1);  // payload top bits kept, quiet bit forced
  EXPECT_EQ(bf(0x00010000u), 0x0001);  // subnormals are not flushed
  EXPECT_EQ(bf(0x00008000u), 0x0000);  // tie -> even
  EXPECT_EQ(bf(0x00018000u), 0x0002);
  EXPECT_EQ(bf(0x80000000u), 0x8000);
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(QuantErrors, WrongSourceSize) {
  std::vector<uint8_t> src(18 * 2 + 1);
  std::vector<float> dst(64);
  absl::Status s = Dequantize(GgmlType::kQ4_0, src, absl::MakeSpan(dst));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q4_0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("36"), std::string::npos) << s;
  EXPECT_NE(s.message().find("37"), std::string::npos) << s;

  std::vector<uint8_t> out(33);
  s = Quantize(GgmlType::kQ8_0, absl::MakeConstSpan(dst.data(), 32), absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q8_0"), std::string::npos) << s;

  std::vector<uint8_t> f16(7);
  s = Dequantize(GgmlType::kF16, f16, absl::MakeSpan(dst.data(), 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("f16"), std::string::npos) << s;
}

TEST(QuantErrors, LengthNotMultipleOfBlock) {
  std::vector<uint8_t> src(144);
  std::vector<float> dst(255);
  absl::Status s = Dequantize(GgmlType::kQ4_K, src, absl::MakeSpan(dst));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q4_K"), std::string::npos) << s;
  EXPECT_NE(s.message().find("256"), std::string::npos) << s;

  std::vector<float> x(33);
  std::vector<uint8_t> q(34);
  s = Quantize(GgmlType::kQ8_0, x, absl::MakeSpan(q));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q8_0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("32"), std::string::npos) << s;
}

TEST(QuantErrors, UnsupportedType) {
  std::vector<uint8_t> src(66);
  std::vector<float> dst(256);
  absl::Status s = Dequantize(GgmlType::kIQ2_XXS, src, absl::MakeSpan(dst));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("iq2_xxs"), std::string::npos) << s;

  std::vector<uint8_t> q(292);
  s = Quantize(GgmlType::kQ8_K, dst, absl::MakeSpan(q));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("q8_K"), std::string::npos) << s;

  s = Dequantize(static_cast<GgmlType>(5), src, absl::MakeSpan(dst));  // a retired id
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("id 5"), std::string::npos) << s;
}

TEST(QuantErrors, EmptyIsFine) {
  EXPECT_TRUE(Dequantize(GgmlType::kQ4_K, {}, {}).ok());
  EXPECT_TRUE(Quantize(GgmlType::kQ8_0, {}, {}).ok());
}

TEST(QuantSupport, Lists) {
  for (GgmlType t :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ4_0,
        GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
        GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K, GgmlType::kMXFP4, GgmlType::kNVFP4})
    EXPECT_TRUE(CanDequantize(t)) << GgmlTypeName(t);
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ4_0,
                     GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
                     GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kMXFP4, GgmlType::kNVFP4})
    EXPECT_TRUE(CanQuantize(t)) << GgmlTypeName(t);
  for (GgmlType t : {GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    EXPECT_TRUE(CanDequantize(t)) << GgmlTypeName(t);
    EXPECT_TRUE(CanQuantize(t)) << GgmlTypeName(t);
  }
  for (GgmlType t :
       {GgmlType::kIQ2_XXS, GgmlType::kIQ3_S, GgmlType::kTQ1_0, GgmlType::kI8, GgmlType::kF64, GgmlType::kQ1_0})
    EXPECT_FALSE(CanDequantize(t)) << GgmlTypeName(t);
  EXPECT_FALSE(CanQuantize(GgmlType::kQ8_K));
  EXPECT_FALSE(CanQuantize(GgmlType::kIQ2_XXS));
}

}  // namespace
}  // namespace memra::formats
