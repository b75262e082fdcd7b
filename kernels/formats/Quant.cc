// Dequantization / quantization entry points, the scalar conversions and the plain, legacy-block
// (Q4_0 ... Q8_1) and FP4 (MXFP4, NVFP4) formats. K-quants live in QuantKQuants.cc (dequantize)
// and QuantKQuantize.cc (quantize), IQ4_NL / IQ4_XS in QuantIQ4.cc.
//
// Every kernel follows the float arithmetic of ggml's reference code (ggml-quants.c) operation by
// operation, in the same order, so results are bit-identical; block layouts are those of
// ggml-common.h. Integer conversions of floats emulate x86 (ggml's C casts of NaN/out-of-range
// values), so edge cases are deterministic; FMA contraction cannot change results here (see
// QuantInternal.h).
#include "kernels/formats/Quant.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "kernels/formats/QuantInternal.h"

namespace memra::formats {
namespace {

using namespace quant_internal;

// ---------------------------------------------------------------------------------------------
// Plain types.

void DequantizeRowF32(const uint8_t* __restrict src, float* __restrict dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
// The element-wise conversions run in chunks of 64 (a fixed trip count, which GCC's -O2 vectorizer
// accepts) plus a scalar tail.
constexpr int64_t kChunk = 64;

void DequantizeRowF16(const uint8_t* __restrict src, float* __restrict dst, int64_t n) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    uint16_t h[kChunk];
    std::memcpy(h, src + 2 * i, sizeof(h));
    for (int64_t j = 0; j < kChunk; ++j) dst[i + j] = HalfToFloatInline(h[j]);
  }
  for (; i < n; ++i) dst[i] = HalfToFloatInline(LoadU16(src + 2 * i));
}
void DequantizeRowBF16(const uint8_t* __restrict src, float* __restrict dst, int64_t n) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    uint16_t h[kChunk];
    std::memcpy(h, src + 2 * i, sizeof(h));
    for (int64_t j = 0; j < kChunk; ++j) dst[i + j] = Bf16ToFloatInline(h[j]);
  }
  for (; i < n; ++i) dst[i] = Bf16ToFloatInline(LoadU16(src + 2 * i));
}

void QuantizeRowF32(const float* __restrict src, uint8_t* __restrict dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void QuantizeRowF16(const float* __restrict src, uint8_t* __restrict dst, int64_t n) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    uint16_t h[kChunk];
    for (int64_t j = 0; j < kChunk; ++j) h[j] = FloatToHalfInline(src[i + j]);
    std::memcpy(dst + 2 * i, h, sizeof(h));
  }
  for (; i < n; ++i) StoreU16(dst + 2 * i, FloatToHalfInline(src[i]));
}
void QuantizeRowBF16(const float* __restrict src, uint8_t* __restrict dst, int64_t n) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    uint16_t h[kChunk];
    for (int64_t j = 0; j < kChunk; ++j) h[j] = FloatToBf16Inline(src[i + j]);
    std::memcpy(dst + 2 * i, h, sizeof(h));
  }
  for (; i < n; ++i) StoreU16(dst + 2 * i, FloatToBf16Inline(src[i]));
}

// ---------------------------------------------------------------------------------------------
// Legacy 32-element blocks. Quants of element j and j+16 share byte j (low / high nibble).

// Q4_0: f16 d; u8 qs[16]. x = (q - 8) * d.
void DequantizeRowQ4_0(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 18, dst += 32) {
    const float d = HalfToFloatInline(LoadU16(src));
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) - 8;
      const int hi = (qs[j] >> 4) - 8;
      dst[j] = static_cast<float>(lo) * d;
      dst[j + 16] = static_cast<float>(hi) * d;
    }
  }
}

// Q4_1: f16 d, m; u8 qs[16]. x = q * d + m.
void DequantizeRowQ4_1(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 20, dst += 32) {
    const float d = HalfToFloatInline(LoadU16(src));
    const float m = HalfToFloatInline(LoadU16(src + 2));
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      const int lo = qs[j] & 0x0f;
      const int hi = qs[j] >> 4;
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

// 1 << j as a table: a per-lane constant lets the vectorizer test the bits of qh.
constexpr uint32_t kBit[32] = {1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
                               1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
                               1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
                               1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};

// Q5_0: f16 d; u32 qh (bit j = 5th bit of element j); u8 qs[16]. x = (q - 16) * d.
void DequantizeRowQ5_0(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 22, dst += 32) {
    const float d = HalfToFloatInline(LoadU16(src));
    const uint32_t qh = LoadU32(src + 2);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int h0 = (qh & kBit[j]) ? 16 : 0;
      const int h1 = (qh & kBit[j + 16]) ? 16 : 0;
      const int lo = ((qs[j] & 0x0f) | h0) - 16;
      const int hi = ((qs[j] >> 4) | h1) - 16;
      dst[j] = static_cast<float>(lo) * d;
      dst[j + 16] = static_cast<float>(hi) * d;
    }
  }
}

// Q5_1: f16 d, m; u32 qh; u8 qs[16]. x = q * d + m.
void DequantizeRowQ5_1(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 24, dst += 32) {
    const float d = HalfToFloatInline(LoadU16(src));
    const float m = HalfToFloatInline(LoadU16(src + 2));
    const uint32_t qh = LoadU32(src + 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int h0 = (qh & kBit[j]) ? 16 : 0;
      const int h1 = (qh & kBit[j + 16]) ? 16 : 0;
      const int lo = (qs[j] & 0x0f) | h0;
      const int hi = (qs[j] >> 4) | h1;
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

// Q8_0: f16 d; i8 qs[32]. x = q * d.
void DequantizeRowQ8_0(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 34, dst += 32) {
    const float d = HalfToFloatInline(LoadU16(src));
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

// Q8_1: f16 d, s (= d * sum(q), for dot products); i8 qs[32]. x = q * d.
void DequantizeRowQ8_1(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 36, dst += 32) {
    const float d = HalfToFloatInline(LoadU16(src));
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + 4);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

// Reference quantizers (ggml quantize_row_*_ref). The integer conversions are ggml's C casts,
// which truncate toward zero; TruncToInt32 reproduces them (x86 semantics for NaN/overflow).

// The element of largest magnitude, with its sign (the first one on ties).
inline float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

inline void MinMax(const float* x, int n, float* min_out, float* max_out) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  *min_out = min;
  *max_out = max;
}

void QuantizeRowQ4_0(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 18) {
    const float max = SignedAbsMax(x, 32);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(dst, FloatToHalfInline(d));
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(TruncToInt32(x[j] * id + 8.5f))));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(TruncToInt32(x[j + 16] * id + 8.5f))));
      dst[2 + j] = static_cast<uint8_t>(static_cast<uint8_t>(q0) | (static_cast<uint8_t>(q1) << 4));
    }
  }
}

void QuantizeRowQ4_1(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 20) {
    float min, max;
    MinMax(x, 32, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(dst, FloatToHalfInline(d));
    StoreU16(dst + 2, FloatToHalfInline(min));
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + 16] - min) * id;
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(TruncToInt32(x0 + 0.5f))));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(TruncToInt32(x1 + 0.5f))));
      dst[4 + j] = static_cast<uint8_t>(static_cast<uint8_t>(q0) | (static_cast<uint8_t>(q1) << 4));
    }
  }
}

void QuantizeRowQ5_0(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 22) {
    const float max = SignedAbsMax(x, 32);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(dst, FloatToHalfInline(d));
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 =
          static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(TruncToInt32(x[j] * id + 16.5f)))));
      const uint8_t q1 = static_cast<uint8_t>(
          std::min(31, static_cast<int>(static_cast<int8_t>(TruncToInt32(x[j + 16] * id + 16.5f)))));
      dst[6 + j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + 16);
    }
    StoreU32(dst + 2, qh);
  }
}

void QuantizeRowQ5_1(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 24) {
    float min, max;
    MinMax(x, 32, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(dst, FloatToHalfInline(d));
    StoreU16(dst + 2, FloatToHalfInline(min));
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + 16] - min) * id;
      const uint8_t q0 = static_cast<uint8_t>(TruncToInt32(x0 + 0.5f));
      const uint8_t q1 = static_cast<uint8_t>(TruncToInt32(x1 + 0.5f));
      dst[8 + j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + 16);
    }
    StoreU32(dst + 4, qh);
  }
}

// ggml's MAX(a, b) macro, ((a) > (b) ? (a) : (b)): with a NaN operand it returns b.
inline float GgmlMax(float a, float b) { return a > b ? a : b; }

// q[j] = (int8_t)roundf(x[j] * id) for one 32-element block, as ggml's Q8 quantizers compute it.
void RoundQ8Block(const float* __restrict x, float id, int8_t* __restrict q) {
  // With finite inputs and a finite id (d is zero or normal, so id * amax is 127 to within an ulp)
  // every product is small: round half away from zero with integer ops, branch-free.
  bool tame = id <= FLT_MAX;
  for (int j = 0; j < 32; ++j) tame &= std::fabs(x[j]) <= FLT_MAX;
  if (tame) {
    for (int j = 0; j < 32; ++j) {
      const float v = x[j] * id;
      const float av = std::fabs(v);
      const int32_t t = static_cast<int32_t>(av);
      const int32_t r = t + static_cast<int32_t>(av - static_cast<float>(t) >= 0.5f);
      const int32_t neg = -static_cast<int32_t>(v < 0.0f);
      q[j] = static_cast<int8_t>((r ^ neg) - neg);
    }
    return;
  }
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(TruncToInt32(RoundHalfAway(x[j] * id)));
}

void QuantizeRowQ8_0(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = GgmlMax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(dst, FloatToHalfInline(d));
    RoundQ8Block(x, id, reinterpret_cast<int8_t*>(dst + 2));
  }
}

void QuantizeRowQ8_1(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 36) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = GgmlMax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(dst, FloatToHalfInline(d));
    int8_t* q = reinterpret_cast<int8_t*>(dst + 4);
    RoundQ8Block(x, id, q);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q[j];
    StoreU16(dst + 2, FloatToHalfInline(static_cast<float>(sum) * d));
  }
}

// ---------------------------------------------------------------------------------------------
// FP4 formats: 4-bit E2M1 codes (values doubled, kFp4Values) with a shared power-of-two (MXFP4)
// or UE4M3 (NVFP4) scale that carries the compensating factor 0.5.

// MXFP4: u8 e (E8M0); u8 qs[16], element j low nibble of qs[j], element j+16 the high nibble.
void DequantizeRowMXFP4(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 17, dst += 32) {
    const float d = E8M0ToFloatHalf(src[0]);
    const uint8_t* qs = src + 1;
    for (int j = 0; j < 16; ++j) {
      dst[j] = Fp4Value(qs[j] & 0x0fu) * d;
      dst[j + 16] = Fp4Value(qs[j] >> 4) * d;
    }
  }
}

// Index of the FP4 code nearest to x at scale e (the first one on ties).
inline int NearestFp4(float x, float e) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kFp4Values[0]) * e - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kFp4Values[i]) * e - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

void QuantizeRowMXFP4(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 17) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    // ggml: (uint8_t)(floorf(log2f(amax)) - 2 + 127); the float->u8 cast goes through int32.
    const uint8_t e =
        amax > 0.0f ? static_cast<uint8_t>(TruncToInt32(std::floor(std::log2(amax)) - 2.0f + 127.0f)) : uint8_t{0};
    const float d = E8M0ToFloatHalf(e);
    dst[0] = e;
    for (int j = 0; j < 16; ++j) {
      const int q0 = NearestFp4(x[j], d);
      const int q1 = NearestFp4(x[j + 16], d);
      dst[1 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// UE4M3 (unsigned E4M3, bias 7) scale byte -> half its value, as ggml_ue4m3_to_fp32; 0x00 and 0x7f
// (the NaN code) decode to 0; bit 7 is ignored otherwise. All 256 values are exact in f32.
struct Ue4m3Table {
  std::array<float, 256> v;
  Ue4m3Table() {
    for (int x = 0; x < 256; ++x) {
      const int exp = (x >> 3) & 0xf;
      const int man = x & 0x7;
      float raw = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                           : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
      v[x] = (x == 0 || x == 0x7f) ? 0.0f : raw * 0.5f;
    }
  }
};
const Ue4m3Table& Ue4m3() {
  static const Ue4m3Table table;
  return table;
}

// float -> UE4M3 code as ggml_fp32_to_ue4m3 (round half up on the mantissa, saturate at 0x7e).
uint8_t FloatToUe4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const int fp32_exp = static_cast<int>((bits >> 23) & 0xff) - 127;
  const int fp32_man = static_cast<int>((bits >> 20) & 0x7);
  int exp = fp32_exp + 7;
  if (exp <= 0) {  // subnormal: man * 2^-9
    int man = TruncToInt32(x * 512.0f + 0.5f);
    man = std::min(man, 7);
    return man < 1 ? 0 : static_cast<uint8_t>(man);
  }
  if (exp >= 15) return 0x7e;
  int man = fp32_man + static_cast<int>((bits >> 19) & 1);
  if (man > 7) {
    man = 0;
    if (++exp >= 15) return 0x7e;
  }
  return static_cast<uint8_t>((exp << 3) | man);
}

// NVFP4: u8 d[4] (UE4M3, one per 16 elements); u8 qs[32]. Sub-block s uses qs[8s..8s+7]: the low
// nibble of qs[8s+j] is element 16s+j, the high nibble element 16s+j+8.
void DequantizeRowNVFP4(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  const Ue4m3Table& ue = Ue4m3();
  for (int64_t b = 0; b < nblocks; ++b, src += 36, dst += 64) {
    for (int s = 0; s < 4; ++s) {
      const float d = ue.v[src[s]];
      const uint8_t* qs = src + 4 + 8 * s;
      float* y = dst + 16 * s;
      for (int j = 0; j < 8; ++j) {
        y[j] = Fp4Value(qs[j] & 0x0fu) * d;
        y[j + 8] = Fp4Value(qs[j] >> 4) * d;
      }
    }
  }
}

void QuantizeRowNVFP4(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  const Ue4m3Table& ue = Ue4m3();
  for (int64_t b = 0; b < nblocks; ++b, x += 64, dst += 36) {
    for (int s = 0; s < 4; ++s) {
      const float* xs = x + 16 * s;
      float amax = 0.0f;
      for (int j = 0; j < 16; ++j)
        if (amax < std::fabs(xs[j])) amax = std::fabs(xs[j]);
      const uint8_t code = FloatToUe4m3(amax / 6.0f);
      dst[s] = code;
      const float d = ue.v[code];
      for (int j = 0; j < 8; ++j) {
        const int q0 = NearestFp4(xs[j], d);
        const int q1 = NearestFp4(xs[j + 8], d);
        dst[4 + 8 * s + j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Dispatch.

struct Kernels {
  DequantRowFn dequant = nullptr;
  QuantRowFn quant = nullptr;
};

Kernels KernelsFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return {DequantizeRowF32, QuantizeRowF32};
    case GgmlType::kF16:
      return {DequantizeRowF16, QuantizeRowF16};
    case GgmlType::kBF16:
      return {DequantizeRowBF16, QuantizeRowBF16};
    case GgmlType::kQ4_0:
      return {DequantizeRowQ4_0, QuantizeRowQ4_0};
    case GgmlType::kQ4_1:
      return {DequantizeRowQ4_1, QuantizeRowQ4_1};
    case GgmlType::kQ5_0:
      return {DequantizeRowQ5_0, QuantizeRowQ5_0};
    case GgmlType::kQ5_1:
      return {DequantizeRowQ5_1, QuantizeRowQ5_1};
    case GgmlType::kQ8_0:
      return {DequantizeRowQ8_0, QuantizeRowQ8_0};
    case GgmlType::kQ8_1:
      return {DequantizeRowQ8_1, QuantizeRowQ8_1};
    case GgmlType::kQ2_K:
      return {DequantizeRowQ2K, QuantizeRowQ2K};
    case GgmlType::kQ3_K:
      return {DequantizeRowQ3K, QuantizeRowQ3K};
    case GgmlType::kQ4_K:
      return {DequantizeRowQ4K, QuantizeRowQ4K};
    case GgmlType::kQ5_K:
      return {DequantizeRowQ5K, QuantizeRowQ5K};
    case GgmlType::kQ6_K:
      return {DequantizeRowQ6K, QuantizeRowQ6K};
    case GgmlType::kQ8_K:
      return {DequantizeRowQ8K, nullptr};
    case GgmlType::kIQ4_NL:
      return {DequantizeRowIQ4NL, QuantizeRowIQ4NL};
    case GgmlType::kIQ4_XS:
      return {DequantizeRowIQ4XS, QuantizeRowIQ4XS};
    case GgmlType::kMXFP4:
      return {DequantizeRowMXFP4, QuantizeRowMXFP4};
    case GgmlType::kNVFP4:
      return {DequantizeRowNVFP4, QuantizeRowNVFP4};
    default:
      return {};
  }
}

// The type's name, or its numeric id for a value that is no ggml type.
std::string TypeLabel(GgmlType type) {
  const uint32_t id = static_cast<uint32_t>(type);
  if (LookupGgmlType(id)) return std::string(GgmlTypeName(type));
  return absl::StrCat("id ", id);
}

// Checks that `elems` elements of `type` are whole blocks stored in exactly `bytes` bytes.
absl::Status CheckSizes(absl::string_view what, GgmlType type, size_t elems, size_t bytes) {
  const GgmlTypeTraits& t = TraitsOf(type);
  if (elems % t.block_elems != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", t.name, ": ", elems, " elements is not a multiple of the block size ", t.block_elems));
  const uint64_t want = static_cast<uint64_t>(elems / t.block_elems) * t.block_bytes;
  if (bytes != want)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", t.name, ": ", elems, " elements take ", want, " bytes, but the buffer holds ", bytes));
  return absl::OkStatus();
}

}  // namespace

bool CanDequantize(GgmlType type) { return KernelsFor(type).dequant != nullptr; }
bool CanQuantize(GgmlType type) { return KernelsFor(type).quant != nullptr; }

absl::Status Dequantize(GgmlType type, absl::Span<const uint8_t> src, absl::Span<float> dst) {
  const DequantRowFn fn = KernelsFor(type).dequant;
  if (fn == nullptr)
    return absl::UnimplementedError(absl::StrCat("dequantize: no dequantizer for ggml type ", TypeLabel(type)));
  MEMRA_RETURN_IF_ERROR(CheckSizes("dequantize", type, dst.size(), src.size()));
  fn(src.data(), dst.data(), static_cast<int64_t>(dst.size() / TraitsOf(type).block_elems));
  return absl::OkStatus();
}

absl::Status Quantize(GgmlType type, absl::Span<const float> src, absl::Span<uint8_t> dst) {
  const QuantRowFn fn = KernelsFor(type).quant;
  if (fn == nullptr)
    return absl::UnimplementedError(absl::StrCat("quantize: no quantizer for ggml type ", TypeLabel(type)));
  MEMRA_RETURN_IF_ERROR(CheckSizes("quantize", type, src.size(), dst.size()));
  fn(src.data(), dst.data(), static_cast<int64_t>(src.size() / TraitsOf(type).block_elems));
  return absl::OkStatus();
}

float HalfToFloat(uint16_t h) { return HalfToFloatInline(h); }
uint16_t FloatToHalf(float f) { return FloatToHalfInline(f); }
float Bf16ToFloat(uint16_t b) { return Bf16ToFloatInline(b); }
uint16_t FloatToBf16(float f) { return FloatToBf16Inline(f); }

}  // namespace memra::formats
