// The per-format block decoders of Dequant.cu: dequant8(block, g, y) writes elements 8g .. 8g + 7
// of one ggml block (its scale and min are constant over 8 aligned elements in every format),
// selected by DEQ_TYPE (the ggml type id), which also defines DEQ_QK (elements per block) and
// DEQ_BYTES (bytes per block). Block layouts are ggml-common.h's; every value is computed with the
// float operations of ggml's dequantize_row_* in the same order (kernels/formats/Quant.cc and
// QuantKQuants.cc, bit-exact with ggml), contraction ruled out (mul_ / add_ / sub_: __fmul_rn ...
// on the device; NVRTC would fuse a * b - c into one FMA by default).
//
// No include guard: Dequant.cu includes it once; tests/kernels/DequantBlocks_test.cc includes it
// once per format in host C++ (MEMRA_DEQ_HOST: the includer provides f16_to_f32 and compiles
// without contraction) and checks every decoder bit for bit against formats::Dequantize.
#ifdef MEMRA_DEQ_HOST
#define MEMRA_DEQ_FN inline
#define MEMRA_DEQ_UNROLL
#else
#define MEMRA_DEQ_FN __device__ __forceinline__
#define MEMRA_DEQ_UNROLL _Pragma("unroll")
#endif

typedef unsigned char u8;
typedef unsigned int u32;

#ifdef MEMRA_DEQ_HOST
MEMRA_DEQ_FN float mul_(float a, float b) { return a * b; }
MEMRA_DEQ_FN float add_(float a, float b) { return a + b; }
MEMRA_DEQ_FN float sub_(float a, float b) { return a - b; }
MEMRA_DEQ_FN float bits_to_f32(u32 u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
#else
MEMRA_DEQ_FN float mul_(float a, float b) { return __fmul_rn(a, b); }
MEMRA_DEQ_FN float add_(float a, float b) { return __fadd_rn(a, b); }
MEMRA_DEQ_FN float sub_(float a, float b) { return __fsub_rn(a, b); }
MEMRA_DEQ_FN float bits_to_f32(u32 u) { return __uint_as_float(u); }
#endif
MEMRA_DEQ_FN float ld_f16(const u8* p) { return f16_to_f32((u16)(p[0] | (p[1] << 8))); }
MEMRA_DEQ_FN u32 ld_u32(const u8* p) { return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24); }

#if DEQ_TYPE == 2  // q4_0: f16 d; u8 qs[16]. x = (q - 8) * d; element j < 16 low nibble of qs[j], j + 16 high.
#define DEQ_QK 32
#define DEQ_BYTES 18
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b);
  const u8* qs = b + 2 + 8 * (g & 1);
  const int shift = 4 * (g >> 1);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) y[j] = mul_((float)((int)((qs[j] >> shift) & 0x0f) - 8), d);
}

#elif DEQ_TYPE == 3  // q4_1: f16 d, m; u8 qs[16]. x = q * d + m.
#define DEQ_QK 32
#define DEQ_BYTES 20
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b), m = ld_f16(b + 2);
  const u8* qs = b + 4 + 8 * (g & 1);
  const int shift = 4 * (g >> 1);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) y[j] = add_(mul_((float)((qs[j] >> shift) & 0x0f), d), m);
}

#elif DEQ_TYPE == 6  // q5_0: f16 d; u32 qh (bit e = 5th bit of element e); u8 qs[16]. x = (q - 16) * d.
#define DEQ_QK 32
#define DEQ_BYTES 22
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b);
  const u32 qh = ld_u32(b + 2);
  const u8* qs = b + 6 + 8 * (g & 1);
  const int shift = 4 * (g >> 1);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) {
    const int e = 8 * g + j;
    const int q = (int)(((qs[j] >> shift) & 0x0f) | (((qh >> e) & 1u) << 4));
    y[j] = mul_((float)(q - 16), d);
  }
}

#elif DEQ_TYPE == 7  // q5_1: f16 d, m; u32 qh; u8 qs[16]. x = q * d + m.
#define DEQ_QK 32
#define DEQ_BYTES 24
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b), m = ld_f16(b + 2);
  const u32 qh = ld_u32(b + 4);
  const u8* qs = b + 8 + 8 * (g & 1);
  const int shift = 4 * (g >> 1);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) {
    const int e = 8 * g + j;
    const u32 q = ((qs[j] >> shift) & 0x0fu) | (((qh >> e) & 1u) << 4);
    y[j] = add_(mul_((float)q, d), m);
  }
}

#elif DEQ_TYPE == 8  // q8_0: f16 d; i8 qs[32]. x = q * d.
#define DEQ_QK 32
#define DEQ_BYTES 34
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b);
  const signed char* qs = (const signed char*)(b + 2 + 8 * g);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) y[j] = mul_((float)qs[j], d);
}

#elif DEQ_TYPE == 39  // mxfp4: u8 e (E8M0); u8 qs[16] (E2M1 codes, element j low nibble of qs[j], j + 16 high).
#define DEQ_QK 32
#define DEQ_BYTES 17
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  // The doubled E2M1 values (ggml's kvalues_mxfp4) and half the E8M0 scale, 2^(e - 128).
  const float kv[16] = {0.f, 1.f, 2.f, 3.f, 4.f, 6.f, 8.f, 12.f, 0.f, -1.f, -2.f, -3.f, -4.f, -6.f, -8.f, -12.f};
  const u32 e = b[0];
  const float d = bits_to_f32(e < 2 ? (0x00200000u << e) : ((e - 1u) << 23));
  const u8* qs = b + 1 + 8 * (g & 1);
  const int shift = 4 * (g >> 1);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) y[j] = mul_(kv[(qs[j] >> shift) & 0x0f], d);
}

#elif DEQ_TYPE == 20 || DEQ_TYPE == 23
// iq4_nl (18 bytes / 32): f16 d; u8 qs[16], 4-bit indices into the 16 int8 levels (ggml's
// kvalues_iq4nl), element j < 16 low nibble of qs[j], j + 16 high; x = d * level.
// iq4_xs (136 bytes / 256): f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]: sub-block s (32
// elements) is qs[16s ..] laid out as iq4_nl's, with the 6-bit scale ls = (scales_l[s / 2] >>
// 4 (s % 2) & 0xf) | (scales_h >> 2s & 3) << 4; x = (d * (ls - 32)) * level.
#if DEQ_TYPE == 20
#define DEQ_QK 32
#define DEQ_BYTES 18
#else
#define DEQ_QK 256
#define DEQ_BYTES 136
#endif
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float kv[16] = {-127.f, -104.f, -83.f, -65.f, -49.f, -35.f, -22.f, -10.f,
                        1.f,    13.f,   25.f,  38.f,  53.f,  69.f,  89.f,  113.f};
#if DEQ_TYPE == 20
  const float d = ld_f16(b);
  const u8* qs = b + 2 + 8 * (g & 1);
#else
  const int s = g >> 2;
  const int ls = ((b[4 + (s >> 1)] >> (4 * (s & 1))) & 0xf) | (((b[2 + (s >> 2)] >> (2 * (s & 3))) & 3) << 4);
  const float d = mul_(ld_f16(b), (float)(ls - 32));
  const u8* qs = b + 8 + 16 * s + 8 * (g & 1);
#endif
  const int shift = 4 * ((g >> 1) & 1);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) y[j] = mul_(d, kv[(qs[j] >> shift) & 0x0f]);
}

#elif DEQ_TYPE == 10  // q2_K (84 bytes): u8 scales[16] (low nibble scale, high min, per 16); u8 qs[64]; f16 d, dmin.
// Element e: half h = e / 128 (32 qs bytes each), 2-bit field s = (e % 128) / 32, byte l = e % 32 of
// the half; x = (d * sc) * q - (dmin * m) with (sc, m) = scales[e / 16].
#define DEQ_QK 256
#define DEQ_BYTES 84
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
  const int e = 8 * g, h = e >> 7, s = (e & 127) >> 5, l = e & 31;
  const u8 sc = b[g >> 1];
  const float dl = mul_(d, (float)(sc & 0x0f));
  const float ml = mul_(dmin, (float)(sc >> 4));
  const u8* q = b + 16 + 32 * h + l;
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) y[j] = sub_(mul_(dl, (float)((q[j] >> (2 * s)) & 3)), ml);
}

#elif DEQ_TYPE == 11  // q3_K (110 bytes): u8 hmask[32]; u8 qs[64] (low 2 bits, as q2_K); u8 scales[12]; f16 d.
// Sixteen 6-bit scales biased by 32; element e's high bit is bit (4h + s) of hmask[e % 32];
// x = (d * (sc - 32)) * (q - (hbit ? 0 : 4)).
#define DEQ_QK 256
#define DEQ_BYTES 110
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d_all = ld_f16(b + 108);
  const u8* packed = b + 96;
  const int is = g >> 1;
  const int low = is < 8 ? (packed[is] & 0x0f) : (packed[is - 8] >> 4);
  const int high = (packed[8 + (is & 3)] >> (2 * (is >> 2))) & 3;
  const float dl = mul_(d_all, (float)((low | (high << 4)) - 32));
  const int e = 8 * g, h = e >> 7, s = (e & 127) >> 5, l = e & 31;
  const u8* q = b + 32 + 32 * h + l;
  const u8* hm = b + l;
  const u32 m = 1u << (4 * h + s);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) {
    const int v = (int)((q[j] >> (2 * s)) & 3) - ((hm[j] & m) ? 0 : 4);
    y[j] = mul_(dl, (float)v);
  }
}

#elif DEQ_TYPE == 12 || DEQ_TYPE == 13
// q4_K (144 bytes): f16 d, dmin; u8 scales[12] (eight 6-bit scale/min pairs); u8 qs[128].
// q5_K (176 bytes): the same + u8 qh[32] before qs (the 5th bit, worth 16).
// Chunk c = e / 64 uses 32 qs bytes: its low half (pair 2c) the low nibbles, its high half (pair
// 2c + 1) the high ones; x = (d * sc) * q - (dmin * m).
#define DEQ_QK 256
#if DEQ_TYPE == 12
#define DEQ_BYTES 144
#else
#define DEQ_BYTES 176
#endif
// Pair j of the 12 packed scale bytes (ggml's get_scale_min_k4).
MEMRA_DEQ_FN void scale_min_k4(int j, const u8* q, u32* sc, u32* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b), dmin = ld_f16(b + 2);
  const int e = 8 * g, c = e >> 6, hi = (e >> 5) & 1, l = e & 31;
  u32 sc, m;
  scale_min_k4(2 * c + hi, b + 4, &sc, &m);
  const float d1 = mul_(d, (float)sc);
  const float m1 = mul_(dmin, (float)m);
#if DEQ_TYPE == 12
  const u8* q = b + 16 + 32 * c + l;
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) y[j] = sub_(mul_(d1, (float)(hi ? (q[j] >> 4) : (q[j] & 0x0f))), m1);
#else
  const u8* qh = b + 16 + l;
  const u8* ql = b + 48 + 32 * c + l;
  const u32 u = (hi ? 2u : 1u) << (2 * c);
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) {
    const u32 q = (hi ? (ql[j] >> 4) : (ql[j] & 0x0f)) + ((qh[j] & u) ? 16u : 0u);
    y[j] = sub_(mul_(d1, (float)q), m1);
  }
#endif
}

#elif DEQ_TYPE == 14  // q6_K (210 bytes): u8 ql[128] (low 4 bits); u8 qh[64] (high 2); i8 scales[16]; f16 d.
// Half h = e / 128 (ql += 64, qh += 32, scales += 8); in it element l + 32k (l < 32) takes nibble
// k >> 1 of ql[l + 32 (k & 1)] and bits 2k of qh[l]; x = (d * sc) * (q - 32), sc = scales[l / 16 + 2k].
#define DEQ_QK 256
#define DEQ_BYTES 210
MEMRA_DEQ_FN void dequant8(const u8* b, int g, float* y) {
  const float d = ld_f16(b + 208);
  const int e = 8 * g, h = e >> 7, k = (e & 127) >> 5, l = e & 31;
  const u8* ql = b + 64 * h + l + 32 * (k & 1);
  const u8* qh = b + 128 + 32 * h + l;
  const signed char* sc = (const signed char*)(b + 192 + 8 * h);
  const float s = mul_(d, (float)sc[(l >> 4) + 2 * k]);
  const int lshift = 4 * (k >> 1), hshift = 2 * k;
  MEMRA_DEQ_UNROLL
  for (int j = 0; j < 8; ++j) {
    const int q = (int)(((ql[j] >> lshift) & 0x0f) | (((qh[j] >> hshift) & 3) << 4)) - 32;
    y[j] = mul_(s, (float)q);
  }
}

#else
#error "Dequant.cu: DEQ_TYPE is not a format with a GPU dequantizer (kernels/cuda/WeightLayout.h HasGpuDequantizer)"
#endif

#undef MEMRA_DEQ_FN
#undef MEMRA_DEQ_UNROLL
