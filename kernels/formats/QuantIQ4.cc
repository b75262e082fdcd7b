// The 4-bit non-linear formats IQ4_NL and IQ4_XS: each 4-bit code indexes the 16 levels of
// kIQ4NLValues (-127 .. 113), scaled per 32 elements.
//
// IQ4_NL (18 bytes / 32 elements): f16 d; u8 qs[16]. Element j is the low nibble of qs[j], element
//   j + 16 the high nibble. x = d * kIQ4NLValues[code].
// IQ4_XS (136 bytes / 256 elements): f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]. Sub-block
//   s (32 elements, qs[16s .. 16s+15] laid out as one IQ4_NL block) has the 6-bit scale
//   ls = (scales_l[s/2] >> 4(s%2) & 0xf) | (scales_h >> 2s & 3) << 4 and
//   x = d * (ls - 32) * kIQ4NLValues[code].
//
// The quantizers are ggml's quantize_iq4_nl / quantize_iq4_xs without an importance matrix (what
// ggml_quantize_chunk and so llama-quantize run): per 32 elements a scale search over 15 candidate
// grids weighted by x^2, then (IQ4_XS) the 6-bit sub-block scales relative to the largest one and
// a final nearest-level pass. Every float expression follows ggml's order so the bytes match.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/formats/QuantInternal.h"

// The weighted sums (sumqx += w * q * x) are sensitive to FMA contraction; see QuantKQuantize.cc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace memra::formats::quant_internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this max |x| a 32-element group counts as zero
constexpr int kSearchSteps = 7;         // ggml's ntry: candidate grids -7 .. +7 around -127 / max

// Index of the level nearest to x (ggml best_index_int8): clamps to the ends, binary search, ties
// go to the upper level. NaN ends at the top (all comparisons false), as in ggml.
inline int NearestLevel(float x) {
  const int8_t* v = kIQ4NLValues;
  if (x <= static_cast<float>(v[0])) return 0;
  if (x >= static_cast<float>(v[15])) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < static_cast<float>(v[mid]))
      hi = mid;
    else
      lo = mid;
  }
  return x - static_cast<float>(v[hi - 1]) < static_cast<float>(v[hi]) - x ? hi - 1 : hi;
}

// Least-squares scale of one 32-element group (weights x^2): the start grid d = max / 127 and
// 2 * kSearchSteps + 1 stretched grids; the best fit wins. Returns 0 for an all-(near-)zero group.
// Fills L with the start grid's levels (callers recompute them from the final scale).
float FitGroupScale(const float* __restrict x, uint8_t* __restrict L) {
  float weight[32];
  for (int j = 0; j < 32; ++j) weight[j] = x[j] * x[j];
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const float v0 = static_cast<float>(kIQ4NLValues[0]);
  float d = -max / v0;
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = NearestLevel(id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = static_cast<float>(kIQ4NLValues[l]);
    const float w = weight[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int itry = -kSearchSteps; itry <= kSearchSteps; ++itry) {
    id = static_cast<float>(itry + kIQ4NLValues[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = static_cast<float>(kIQ4NLValues[NearestLevel(id * x[j])]);
      const float w = weight[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Packs 32 levels as one IQ4_NL nibble block (element j low, j + 16 high).
inline void PackNibbles(const uint8_t* __restrict L, uint8_t* __restrict qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

// One 32-element block of nibbles -> f32 at scale d.
inline void DecodeNibbles(const uint8_t* __restrict qs, float d, float* __restrict y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIQ4NLValues[qs[j] & 0x0f]);
    y[j + 16] = d * static_cast<float>(kIQ4NLValues[qs[j] >> 4]);
  }
}

}  // namespace

void DequantizeRowIQ4NL(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 18, dst += 32)
    DecodeNibbles(src + 2, HalfToFloatInline(LoadU16(src)), dst);
}

void DequantizeRowIQ4XS(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 136) {
    const float d = HalfToFloatInline(LoadU16(src));
    const uint32_t scales_h = LoadU16(src + 2);
    const uint8_t* scales_l = src + 4;
    const uint8_t* qs = src + 8;
    for (int s = 0; s < 8; ++s, qs += 16, dst += 32) {
      const int ls = ((scales_l[s / 2] >> (4 * (s % 2))) & 0xf) | (((scales_h >> (2 * s)) & 3) << 4);
      DecodeNibbles(qs, d * static_cast<float>(ls - 32), dst);
    }
  }
}

void QuantizeRowIQ4NL(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 32, dst += 18) {
    uint8_t L[32];
    const float d = FitGroupScale(x, L);
    StoreU16(dst, FloatToHalfInline(d));
    // ggml requantizes with the fitted (not the f16-rounded) scale.
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(NearestLevel(id * x[j]));
    PackNibbles(L, dst + 2);
  }
}

void QuantizeRowIQ4XS(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += 256, dst += 136) {
    uint8_t L[256];
    float scales[8];
    float max_scale = 0, amax_scale = 0;
    for (int s = 0; s < 8; ++s) {
      scales[s] = FitGroupScale(x + 32 * s, L + 32 * s);
      const float abs_d = std::fabs(scales[s]);
      if (abs_d > amax_scale) {
        amax_scale = abs_d;
        max_scale = scales[s];
      }
    }
    // The super-block scale maps the largest sub-block scale to -32 (6-bit scales -32 .. 31).
    const float d = -max_scale / 32;
    StoreU16(dst, FloatToHalfInline(d));
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint32_t scales_h = 0;
    uint8_t* scales_l = dst + 4;
    std::memset(scales_l, 0, 4);
    for (int s = 0; s < 8; ++s) {
      int l = NearestInt(id * scales[s]);
      l = l < -32 ? -32 : (l > 31 ? 31 : l);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      const float* xs = x + 32 * s;
      uint8_t* Ls = L + 32 * s;
      for (int j = 0; j < 32; ++j) Ls[j] = static_cast<uint8_t>(NearestLevel(idl * xs[j]));
      const uint32_t biased = static_cast<uint32_t>(l + 32);
      scales_l[s / 2] |= static_cast<uint8_t>((biased & 0xf) << (4 * (s % 2)));
      scales_h |= (biased >> 4) << (2 * s);
    }
    StoreU16(dst + 2, static_cast<uint16_t>(scales_h));
    for (int s = 0; s < 8; ++s) PackNibbles(L + 32 * s, dst + 8 + 16 * s);
  }
}

}  // namespace memra::formats::quant_internal
