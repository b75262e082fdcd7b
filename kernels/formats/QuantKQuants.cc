// K-quant dequantizers (256-element super-blocks): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
// Layouts are ggml-common.h's block_q*_K; the float arithmetic follows ggml's dequantize_row_q*_K
// operation by operation (e.g. Q4_K: (d * sc) * q - (dmin * m)), so results are bit-identical.
#include <cstdint>

#include "kernels/formats/QuantInternal.h"

namespace memra::formats::quant_internal {
namespace {

constexpr int kQK = 256;

// The 6-bit (scale, min) pair j of Q4_K/Q5_K's 12 packed scale bytes. Pairs 0..3 sit in the low
// 6 bits of bytes j / j+4; pairs 4..7 take their low 4 bits from byte j+4 and their top 2 bits
// from the spare high bits of bytes j-4 (scale) and j (min).
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace

// Q2_K (84 bytes): u8 scales[16] (low nibble scale, high nibble min, per 16 elements);
// u8 qs[64] (2-bit quants); f16 d; f16 dmin. x = (d * sc) * q - (dmin * m).
// Each 128-element half uses 32 qs bytes; the 2-bit field at `shift` of byte l (l < 32) holds
// element 32 * (shift / 2) + l of that half.
void DequantizeRowQ2K(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 84) {
    const uint8_t* scales = src;
    const uint8_t* q = src + 16;
    const float d = HalfToFloatInline(LoadU16(src + 80));
    const float dmin = HalfToFloatInline(LoadU16(src + 82));
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = scales[is++];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          const uint8_t* qp = q + 16 * part;
          for (int l = 0; l < 16; ++l) dst[l] = dl * static_cast<float>((qp[l] >> shift) & 3) - ml;
          dst += 16;
        }
      }
    }
  }
}

// Q3_K (110 bytes): u8 hmask[32] (3rd bit); u8 qs[64] (low 2 bits, arranged as Q2_K);
// u8 scales[12] (sixteen 6-bit signed scales, biased by 32); f16 d.
// x = (d * (sc - 32)) * (q - (hbit ? 0 : 4)). Element 32*k + l (k = 0..7 over the block) takes its
// high bit from bit k of hmask[l].
void DequantizeRowQ3K(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 110) {
    const uint8_t* hm = src;
    const uint8_t* q = src + 32;
    const uint8_t* packed = src + 96;
    const float d_all = HalfToFloatInline(LoadU16(src + 108));
    // Scale j: low 4 bits from the low (j < 8) or high (j >= 8) nibble of packed[j % 8], top 2 bits
    // from bits 2*(j/4) of packed[8 + j%4].
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
      const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = (low | (high << 4)) - 32;
    }
    int is = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d_all * static_cast<float>(scales[is++]);
          const uint8_t* qp = q + 16 * part;
          const uint8_t* hp = hm + 16 * part;
          for (int l = 0; l < 16; ++l) {
            const int v = ((qp[l] >> shift) & 3) - ((hp[l] & m) ? 0 : 4);
            dst[l] = dl * static_cast<float>(v);
          }
          dst += 16;
        }
      }
    }
  }
}

// Q4_K (144 bytes): f16 d; f16 dmin; u8 scales[12] (eight 6-bit scale/min pairs); u8 qs[128].
// Each 64 elements use 32 qs bytes: low nibbles -> first 32 (pair 2c), high -> next 32 (2c+1).
void DequantizeRowQ4K(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 144) {
    const float d = HalfToFloatInline(LoadU16(src));
    const float dmin = HalfToFloatInline(LoadU16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* q = src + 16;
    for (int c = 0; c < 4; ++c, q += 32, dst += 64) {
      uint8_t sc, m;
      ScaleMinK4(2 * c, scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      ScaleMinK4(2 * c + 1, scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) dst[l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) dst[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Q5_K (176 bytes): f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. As Q4_K plus a 5th
// bit: chunk c's low half takes bit 2c of qh[l], its high half bit 2c+1 (worth 16).
void DequantizeRowQ5K(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 176) {
    const float d = HalfToFloatInline(LoadU16(src));
    const float dmin = HalfToFloatInline(LoadU16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* ql = src + 48;
    for (int c = 0; c < 4; ++c, ql += 32, dst += 64) {
      uint8_t sc, m;
      ScaleMinK4(2 * c, scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      ScaleMinK4(2 * c + 1, scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = dmin * static_cast<float>(m);
      const uint8_t u1 = static_cast<uint8_t>(1u << (2 * c));
      const uint8_t u2 = static_cast<uint8_t>(2u << (2 * c));
      for (int l = 0; l < 32; ++l) dst[l] = d1 * static_cast<float>((ql[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) dst[32 + l] = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// Q6_K (210 bytes): u8 ql[128] (low 4 bits); u8 qh[64] (high 2 bits); i8 scales[16]; f16 d (last).
// Per 128-element half (ql += 64, qh += 32, scales += 8), for l < 32 the four elements l, l+32,
// l+64, l+96 take nibbles ql[l] lo, ql[l+32] lo, ql[l] hi, ql[l+32] hi and 2-bit fields 0..3 of
// qh[l]; x = (d * sc) * (q - 32), sc = scales[l/16 + 2*k] for element l + 32*k.
void DequantizeRowQ6K(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = HalfToFloatInline(LoadU16(src + 208));
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128) {
      for (int g = 0; g < 2; ++g) {  // l in [16g, 16g + 16) uses scales g, g+2, g+4, g+6
        const float s1 = d * static_cast<float>(sc[g]);
        const float s2 = d * static_cast<float>(sc[g + 2]);
        const float s3 = d * static_cast<float>(sc[g + 4]);
        const float s4 = d * static_cast<float>(sc[g + 6]);
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          dst[l] = s1 * static_cast<float>(q1);
          dst[l + 32] = s2 * static_cast<float>(q2);
          dst[l + 64] = s3 * static_cast<float>(q3);
          dst[l + 96] = s4 * static_cast<float>(q4);
        }
      }
    }
  }
}

// Q8_K (292 bytes): f32 d; i8 qs[256]; i16 bsums[16] (sums for dot products). x = d * q.
void DequantizeRowQ8K(const uint8_t* __restrict src, float* __restrict dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 292, dst += kQK) {
    const float d = LoadF32(src);
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + 4);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(qs[j]);
  }
}

}  // namespace memra::formats::quant_internal
