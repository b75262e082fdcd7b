// K-quant reference quantizers (ggml's quantize_row_q{2..6}_K_ref: what llama-quantize and
// ggml_quantize_chunk use when no importance matrix is given). Block layouts as in
// QuantKQuants.cc. The scale searches are iterative least-squares fits; every float expression,
// comparison and accumulation order below follows ggml's so the bytes come out identical.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/formats/QuantInternal.h"

// Unlike the other kernels these searches are sensitive to FMA contraction (accumulated products
// such as sum += w * l * x). The build compiles ISO C++ (GCC then does not contract), and this
// keeps it so should -ffp-contract=fast or a GNU dialect with -march=native come along.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace memra::formats::quant_internal {
namespace {

constexpr int kQK = 256;
constexpr float kGroupMaxEps = 1e-15f;  // below this a group counts as all zero

inline int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Weighted fit of x ~ scale * L + min with L in [0, nmax] and min <= 0 (ggml make_qkx2_quants):
// starts from the min/max grid, then tries nstep+1 stretched grids and keeps the best weighted
// error (absolute if use_mad, else squared). Returns the scale; *neg_min = -min.
float FitScaleMin(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min, uint8_t* Laux,
                  float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(Clamp(l, 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *neg_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Largest-magnitude element with its sign (the first on ties) and its magnitude.
inline void SignedMax(int n, const float* x, float* max_out, float* amax_out) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  *max_out = max;
  *amax_out = amax;
}

// Symmetric fit x ~ scale * l, l in [-nmax, nmax-1], weights x^2 (ggml make_qx_quants with
// rmse_type 1 and no importance weights): tries 19 grids around nmax / max and keeps the best
// least-squares fit. L receives l + nmax.
float FitSymmetric(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  SignedMax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float lf = static_cast<float>(l);
    sumlx += w * x[i] * lf;
    suml2 += w * lf * lf;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      const float lf = static_cast<float>(l);
      sumlx += w * x[i] * lf;
      suml2 += w * lf * lf;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's symmetric fit (ggml make_q3_quants with do_rmse): the nmax / max grid, then up to five
// passes of per-element coordinate descent on the weighted least-squares error. L = l + nmax.
float FitSymmetricQ3(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  SignedMax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    const float lf = static_cast<float>(l);
    sumlx += w * x[i] * lf;
    suml2 += w * lf * lf;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = Clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs four 2-bit planes: byte l of each 32-byte group holds elements l, l+32, l+64, l+96 of its
// 128-element half (Q2_K and Q3_K low bits).
void Pack2Bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// The eight 6-bit (scale, min) pairs of Q4_K/Q5_K into 12 bytes (inverse of ScaleMinK4).
void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

inline void UnpackScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per 32-element group a weighted scale/min fit,
// the scales and mins quantized to 6 bits against f16 super-block d/dmin, then the elements
// re-quantized against the stored scales. Fills scales[12], d, dmin and L[256].
void QuantizeScalesK4(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t* scales_out,
                      uint16_t* d_out, uint16_t* dmin_out, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xj[l]);
    scales[j] = FitScaleMin(32, nmax, xj, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    const uint8_t s = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    const uint8_t m = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    ls[j] = s < 63 ? s : 63;
    lm[j] = m < 63 ? m : 63;
  }
  PackScaleMinK4(ls, lm, scales_out);
  *d_out = FloatToHalfInline(max_scale / 63.f);
  *dmin_out = FloatToHalfInline(max_min / 63.f);
  const float d_all = HalfToFloatInline(*d_out);
  const float dmin_all = HalfToFloatInline(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    UnpackScaleMinK4(j, scales_out, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keeps the fit's quants, as ggml does
    const float dm = dmin_all * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = static_cast<uint8_t>(Clamp(NearestInt((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}

}  // namespace

// Q2_K: 16 groups of 16, 2-bit quants with 4-bit scale and min per group (MAD fit).
void QuantizeRowQ2K(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  constexpr float kQ4Scale = 15.f;
  uint8_t L[kQK];
  uint8_t Laux[16];
  float weights[16];
  float mins[16], scales[16];
  for (int64_t b = 0; b < nblocks; ++b, x += kQK, dst += 84) {
    uint8_t* out_scales = dst;
    uint8_t* qs = dst + 16;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = FitScaleMin(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    uint16_t d_bits, dmin_bits;
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) out_scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      d_bits = FloatToHalfInline(max_scale / kQ4Scale);
    } else {
      for (int j = 0; j < 16; ++j) out_scales[j] = 0;
      d_bits = FloatToHalfInline(0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j)
        out_scales[j] = static_cast<uint8_t>(out_scales[j] | (NearestInt(iscale * mins[j]) << 4));
      dmin_bits = FloatToHalfInline(max_min / kQ4Scale);
    } else {
      dmin_bits = FloatToHalfInline(0.f);
    }
    StoreU16(dst + 80, d_bits);
    StoreU16(dst + 82, dmin_bits);
    const float d_all = HalfToFloatInline(d_bits);
    const float dmin_all = HalfToFloatInline(dmin_bits);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(out_scales[j] & 0x0f);
      if (d == 0.0f) continue;
      const float dm = dmin_all * static_cast<float>(out_scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<uint8_t>(Clamp(NearestInt((x[16 * j + ii] + dm) / d), 0, 3));
    }
    Pack2Bit(L, qs);
  }
}

// Q3_K: 16 groups of 16, 3-bit signed quants (2 low bits + hmask bit) with 6-bit signed scales.
void QuantizeRowQ3K(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  int8_t L[kQK];
  float scales[16];
  for (int64_t b = 0; b < nblocks; ++b, x += kQK, dst += 110) {
    uint8_t* hmask = dst;
    uint8_t* qs = dst + 32;
    uint8_t* packed = dst + 96;
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = FitSymmetricQ3(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(packed, 0, 12);
    uint16_t d_bits;
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        l = Clamp(l, -32, 31) + 32;
        if (j < 8)
          packed[j] = static_cast<uint8_t>(l & 0x0f);
        else
          packed[j - 8] = static_cast<uint8_t>(packed[j - 8] | ((l & 0x0f) << 4));
        l >>= 4;
        packed[j % 4 + 8] = static_cast<uint8_t>(packed[j % 4 + 8] | (l << (2 * (j / 4))));
      }
      d_bits = FloatToHalfInline(1 / iscale);
    } else {
      d_bits = FloatToHalfInline(0.f);
    }
    StoreU16(dst + 108, d_bits);
    const float d_all = HalfToFloatInline(d_bits);
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
      const int sc = (low | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      const float d = d_all * static_cast<float>(sc);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<int8_t>(Clamp(NearestInt(x[16 * j + ii] / d), -4, 3) + 4);
    }
    // High bit of element 32k + l (k = 0..7) goes to bit k of hmask[l].
    std::memset(hmask, 0, 32);
    for (int j = 0; j < kQK; ++j) {
      if (L[j] > 3) {
        hmask[j % 32] = static_cast<uint8_t>(hmask[j % 32] | (1u << (j / 32)));
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
    }
    Pack2Bit(reinterpret_cast<const uint8_t*>(L), qs);
  }
}

// Q4_K: 8 groups of 32, 4-bit quants, 6-bit scale and min per group.
void QuantizeRowQ4K(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  uint8_t L[kQK];
  for (int64_t b = 0; b < nblocks; ++b, x += kQK, dst += 144) {
    uint16_t d_bits, dmin_bits;
    QuantizeScalesK4(x, 15, -1.f, 0.1f, 20, dst + 4, &d_bits, &dmin_bits, L);
    StoreU16(dst, d_bits);
    StoreU16(dst + 2, dmin_bits);
    uint8_t* q = dst + 16;
    for (int j = 0; j < kQK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

// Q5_K: as Q4_K with 5-bit quants; the 5th bit of chunk c goes to bits 2c / 2c+1 of qh.
void QuantizeRowQ5K(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  uint8_t L[kQK];
  for (int64_t b = 0; b < nblocks; ++b, x += kQK, dst += 176) {
    uint16_t d_bits, dmin_bits;
    QuantizeScalesK4(x, 31, -0.5f, 0.1f, 15, dst + 4, &d_bits, &dmin_bits, L);
    StoreU16(dst, d_bits);
    StoreU16(dst + 2, dmin_bits);
    uint8_t* qh = dst + 16;
    uint8_t* ql = dst + 48;
    std::memset(qh, 0, 32);
    for (int c = 0; c < 4; ++c, ql += 32) {
      const uint8_t m1 = static_cast<uint8_t>(1u << (2 * c)), m2 = static_cast<uint8_t>(2u << (2 * c));
      for (int j = 0; j < 32; ++j) {
        int l1 = L[64 * c + j], l2 = L[64 * c + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
  }
}

// Q6_K: 16 groups of 16, 6-bit signed quants with 8-bit signed scales.
void QuantizeRowQ6K(const float* __restrict x, uint8_t* __restrict dst, int64_t nblocks) {
  int8_t L[kQK];
  float scales[16];
  for (int64_t b = 0; b < nblocks; ++b, x += kQK, dst += 210) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float scale = FitSymmetric(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(dst, 0, 210);
      continue;
    }
    int8_t* out_scales = reinterpret_cast<int8_t*>(dst + 192);
    const float iscale = -128.f / max_scale;
    const uint16_t d_bits = FloatToHalfInline(1 / iscale);
    StoreU16(dst + 208, d_bits);
    for (int ib = 0; ib < 16; ++ib) {
      const int s = NearestInt(iscale * scales[ib]);
      out_scales[ib] = static_cast<int8_t>(s < 127 ? s : 127);
    }
    const float d_all = HalfToFloatInline(d_bits);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(out_scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<int8_t>(Clamp(NearestInt(x[16 * j + ii] / d), -32, 31) + 32);
    }
    uint8_t* ql = dst;
    uint8_t* qh = dst + 128;
    for (int j = 0; j < kQK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0x0f) | ((q4 & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace memra::formats::quant_internal
