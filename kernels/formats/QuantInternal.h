// Internal helpers shared by the Quant*.cc files: little-endian loads/stores, the scalar
// conversions in inline (vectorizable) form, and the per-format row kernels. Not a public API.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

// The kernels mirror ggml's float expressions as written. For the dequantizers and the simple
// quantizers FMA contraction happens not to matter (every product that feeds an addition is exact,
// or the addend is large enough to absorb the product's rounding): -ffp-contract=fast with
// -march=native still matches ggml, as the golden tests confirm. The K-quant scale searches do
// depend on it; QuantKQuantize.cc turns contraction off for GCC, and this pragma does for clang.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace memra::formats::quant_internal {

static_assert(std::endian::native == std::endian::little, "block formats are read as little-endian");

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }
inline void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof(v)); }

// All-ones when `cond` holds, else zero: selects written as masks so loops stay branch-free (GCC's
// -O2 vectorizer does not if-convert).
inline uint32_t MaskIf(bool cond) { return 0u - static_cast<uint32_t>(cond); }
inline uint32_t Select(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }

// IEEE binary16 -> binary32, exact. Signalling NaNs come back quiet (as ggml's conversion and
// x86's vcvtph2ps do); every other value, payloads included, converts exactly.
inline float HalfToFloatInline(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // Normal numbers: move the 15-bit field up and rebias the exponent from 15 to 127.
  uint32_t normal = (em << 13) + (112u << 23);
  // Inf/NaN (exponent 31): rebias once more so the f32 exponent is 255; quiet any NaN.
  normal += MaskIf(em >= 0x7c00u) & (112u << 23);
  normal |= MaskIf(em > 0x7c00u) & 0x00400000u;
  // Subnormals (and zero): mantissa * 2^-24, exact in f32.
  const float sub = static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f;
  const uint32_t bits = Select(MaskIf(em < 0x0400u), std::bit_cast<uint32_t>(sub), normal);
  return std::bit_cast<float>(bits | sign);
}

// binary32 -> binary16, round to nearest even; overflow -> inf; NaN -> sign | 0x7e00 (as ggml).
inline uint16_t FloatToHalfInline(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  // Normal half range: round the low 13 mantissa bits away (carries ripple into the exponent).
  const uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);
  const uint32_t normal = (rounded >> 13) - (112u << 10);
  // Subnormal half range (|f| < 2^-14): adding 0.5 aligns the value to multiples of 2^-24 and the
  // FPU rounds it to nearest even; the low bits of the sum are then the half mantissa.
  const float aligned = std::bit_cast<float>(a) + 0.5f;
  const uint32_t sub = std::bit_cast<uint32_t>(aligned) - 0x3f000000u;
  uint32_t h = Select(MaskIf(a < 0x38800000u), sub, normal);
  h = Select(MaskIf(a >= 0x477ff000u), 0x7c00u, h);  // >= 65520 rounds to infinity
  h = Select(MaskIf(a > 0x7f800000u), 0x7e00u, h);   // NaN
  return static_cast<uint16_t>(h | sign);
}

inline float Bf16ToFloatInline(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// As ggml_compute_fp32_to_bf16: NaN keeps its top bits and is forced quiet; everything else rounds
// to nearest even (subnormals are not flushed; overflow rounds to inf).
inline uint16_t FloatToBf16Inline(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t nan = (x >> 16) | 64u;
  const uint32_t rounded = (x + (0x7fffu + ((x >> 16) & 1u))) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// E8M0 exponent byte -> 2^(e-128) (half the MX scale; the FP4 value table is doubled).
inline float E8M0ToFloatHalf(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// float -> int32 as x86 cvttss2si does (truncation; NaN and out-of-range give INT32_MIN). C casts
// of out-of-range floats are undefined; ggml's reference quantizers compiled for x86 behave like
// this, so emulating it keeps edge cases (inf/NaN inputs) deterministic and identical.
inline int32_t TruncToInt32(float v) {
  if (!(v > -2147483904.0f && v < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(v);
}

// roundf (half away from zero), exact, without a libm call. Finite |v| >= 2^23 is already integral.
inline float RoundHalfAway(float v) {
  const float av = std::fabs(v);
  if (!(av < 8388608.0f)) return v;
  const float t = static_cast<float>(static_cast<int32_t>(av));
  const float r = (av - t) >= 0.5f ? t + 1.0f : t;
  return std::copysign(r, v);
}

// ggml's nearest_int: round to nearest (ties to even) for |v| <= 2^22 - 1; adding 1.5 * 2^23 puts
// the integer in the low mantissa bits.
inline int NearestInt(float v) {
  const float biased = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(biased) & 0x007fffffu) - 0x00400000;
}

// The 16 non-linear levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl), ascending.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The doubled E2M1 values shared by MXFP4 and NVFP4.
inline constexpr int8_t kFp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// kFp4Values[c] as a float, computed with integer ops instead of a table lookup (vectorizable): code
// bits s e1 e0 m; the doubled value is m (e = 0) or (2 + m) * 2^(e-1) = (1 + m/2) * 2^e. Codes 0 and
// 8 are both +0 (as the int8 table converts).
inline float Fp4Value(uint32_t code) {
  const uint32_t low = code & 7u, e = low >> 1, m = low & 1u;
  const uint32_t normal = ((e + 127u) << 23) | (m << 22);
  const uint32_t mag = Select(MaskIf(e == 0), MaskIf(m != 0) & 0x3f800000u, normal);
  const uint32_t sign = MaskIf(((code & 8u) != 0) & (low != 0)) & 0x80000000u;
  return std::bit_cast<float>(mag | sign);
}

// Row kernels: `nblocks` blocks from src to dst (dequantize) or back (quantize).
using DequantRowFn = void (*)(const uint8_t* src, float* dst, int64_t nblocks);
using QuantRowFn = void (*)(const float* src, uint8_t* dst, int64_t nblocks);

// QuantKQuants.cc
void DequantizeRowQ2K(const uint8_t* src, float* dst, int64_t nblocks);
void DequantizeRowQ3K(const uint8_t* src, float* dst, int64_t nblocks);
void DequantizeRowQ4K(const uint8_t* src, float* dst, int64_t nblocks);
void DequantizeRowQ5K(const uint8_t* src, float* dst, int64_t nblocks);
void DequantizeRowQ6K(const uint8_t* src, float* dst, int64_t nblocks);
void DequantizeRowQ8K(const uint8_t* src, float* dst, int64_t nblocks);

// QuantIQ4.cc (dequantizers and ggml's quantizers without an importance matrix)
void DequantizeRowIQ4NL(const uint8_t* src, float* dst, int64_t nblocks);
void DequantizeRowIQ4XS(const uint8_t* src, float* dst, int64_t nblocks);
void QuantizeRowIQ4NL(const float* src, uint8_t* dst, int64_t nblocks);
void QuantizeRowIQ4XS(const float* src, uint8_t* dst, int64_t nblocks);

// QuantKQuantize.cc (ggml's reference quantizers, no importance matrix)
void QuantizeRowQ2K(const float* src, uint8_t* dst, int64_t nblocks);
void QuantizeRowQ3K(const float* src, uint8_t* dst, int64_t nblocks);
void QuantizeRowQ4K(const float* src, uint8_t* dst, int64_t nblocks);
void QuantizeRowQ5K(const float* src, uint8_t* dst, int64_t nblocks);
void QuantizeRowQ6K(const float* src, uint8_t* dst, int64_t nblocks);

}  // namespace memra::formats::quant_internal
