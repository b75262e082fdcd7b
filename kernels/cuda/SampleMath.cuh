// memra's sampling arithmetic: one definition for the CPU sampler (kernels/cpu/Sampling.cc, the
// reference) and the device sampler (Sample.cu). A sampled token is decided by integer sums of
// fixed-point weights, so it does not depend on summation order: the CPU and the GPU pick the same
// token for the same logits, parameters and u, whatever the batch around the row
// (docs/design/sampling.md).
//
// Every float operation is written out rounded (NVRTC fuses a * b + c into one FMA by default;
// the host includer, MEMRA_SMP_HOST, is compiled with -ffp-contract=off), and exp is a fixed
// polynomial of FMAs rather than either side's library exp, which differ in the last bit.
//
// No include guard: Sample.cu and kernels/cpu/Sampling.cc each include it once.
#ifdef MEMRA_SMP_HOST
#define SMP_FN inline
SMP_FN float smp_mul(float a, float b) { return a * b; }
SMP_FN float smp_add(float a, float b) { return a + b; }
SMP_FN float smp_sub(float a, float b) { return a - b; }
SMP_FN float smp_div(float a, float b) { return a / b; }
SMP_FN float smp_fma(float a, float b, float c) { return std::fma(a, b, c); }
SMP_FN double smp_dmul(double a, double b) { return a * b; }
SMP_FN float smp_rint(float x) { return std::nearbyint(x); }
SMP_FN unsigned smp_bits(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
SMP_FN float smp_from_bits(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
#else
#define SMP_FN __device__ __forceinline__
SMP_FN float smp_mul(float a, float b) { return __fmul_rn(a, b); }
SMP_FN float smp_add(float a, float b) { return __fadd_rn(a, b); }
SMP_FN float smp_sub(float a, float b) { return __fsub_rn(a, b); }
SMP_FN float smp_div(float a, float b) { return __fdiv_rn(a, b); }
SMP_FN float smp_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
SMP_FN double smp_dmul(double a, double b) { return __dmul_rn(a, b); }
SMP_FN float smp_rint(float x) { return rintf(x); }
SMP_FN unsigned smp_bits(float x) { return __float_as_uint(x); }
SMP_FN float smp_from_bits(unsigned u) { return __uint_as_float(u); }
#endif

// The params row of one sampled row (f32 [S, SMP_PARAMS]).
#define SMP_TEMPERATURE 0  // <= 0: greedy
#define SMP_TOP_K 1        // < 1 or >= n_vocab: off
#define SMP_TOP_P 2        // >= 1: off
#define SMP_MIN_P_LOGIT 3  // log(min_p) as the host computes it; -inf: off
#define SMP_U 4            // the draw, in [0, 1) (24 random bits)
#define SMP_REPEAT 5       // repeat_penalty (1: off)
#define SMP_FREQUENCY 6    // frequency_penalty
#define SMP_PRESENCE 7     // presence_penalty
#define SMP_PARAMS 8

// Weights are e^x in units of 2^-40 (so a row's sum of up to 2^23 weights fits 64 bits); below
// x = -28 a weight is 0 (e^-28 * 2^40 < 1 anyway), which also bounds the polynomial's range.
#define SMP_WEIGHT_BITS 40
#define SMP_CUTOFF (-28.0f)

// The sampling order is by this key descending (the float's order, -0 just below +0), ties by
// the lower id.
SMP_FN unsigned smp_key(float l) {
  const unsigned b = smp_bits(l);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
SMP_FN float smp_key_value(unsigned k) { return smp_from_bits((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// floor(2^40 * e^x) for x <= 0 (0 below SMP_CUTOFF): x = n ln2 + r, |r| <= ln2 / 2, e^r by its
// degree-7 Taylor polynomial (error < 2^-26), then an exact power-of-two scale.
SMP_FN unsigned long long smp_weight(float x) {
  if (!(x >= SMP_CUTOFF)) return 0ull;
  const float n = smp_rint(smp_mul(x, 1.44269504f));
  float r = smp_fma(n, -0.693145752f, x);  // ln2 in two parts (the high one exact in 15 bits)
  r = smp_fma(n, -1.42860682e-06f, r);
  float p = 1.98412698e-04f;  // 1/5040
  p = smp_fma(p, r, 1.38888889e-03f);
  p = smp_fma(p, r, 8.33333333e-03f);
  p = smp_fma(p, r, 4.16666667e-02f);
  p = smp_fma(p, r, 1.66666667e-01f);
  p = smp_fma(p, r, 0.5f);
  p = smp_fma(p, r, 1.0f);
  p = smp_fma(p, r, 1.0f);
  const int e = static_cast<int>(n) + SMP_WEIGHT_BITS;  // 0 .. 40 for x in [-28, 0]
  if (e < 0) return 0ull;
  const float scaled = smp_mul(p, smp_from_bits(static_cast<unsigned>(e + 127) << 23));
  return static_cast<unsigned long long>(scaled);
}

// llama_sampler_penalties on one logit seen `count` > 0 times (count 0: unchanged), clamped to the
// finite range so no weight or key is undefined.
SMP_FN float smp_penalize(float l, int count, float repeat, float frequency, float presence) {
  if (count <= 0) return l;
  float v = l <= 0.0f ? smp_mul(l, repeat) : smp_div(l, repeat);
  v = smp_sub(v, smp_fma(static_cast<float>(count), frequency, presence));
  const float big = 3.40282347e+38f;
  return v > big ? big : (v < -big ? -big : v);
}
