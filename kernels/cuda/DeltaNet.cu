// Gated DeltaNet kernels: the causal depthwise conv with its ring state, and the gated delta
// rule scan (sequential in time; one thread owns one column j of a head's state S[:, j] in
// registers, so a token's update needs no cross-thread reduction).
#include "Common.cuh"

#ifdef CONV_CHANNELS
// xin = concat(state, x) over time; y[t, c] = sum_i xin[t+i, c] * w[c, i]; the state keeps the
// last CONV_K-1 rows of xin. x, y: [n_tok, C]; w: [C, K]; state: [C, K-1] (oldest first).
extern "C" __global__ void conv1d_causal(const float* x, const float* w, float* state, float* y,
                                         int n_tok) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= CONV_CHANNELS) return;
  float win[CONV_K];
  float wc[CONV_K];
#pragma unroll
  for (int i = 0; i < CONV_K; ++i) wc[i] = w[(i64)c * CONV_K + i];
#pragma unroll
  for (int i = 0; i < CONV_K - 1; ++i) win[i] = state[(i64)c * (CONV_K - 1) + i];
  for (int t = 0; t < n_tok; ++t) {
    win[CONV_K - 1] = x[(i64)t * CONV_CHANNELS + c];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < CONV_K; ++i) s += win[i] * wc[i];
    y[(i64)t * CONV_CHANNELS + c] = s;
#pragma unroll
    for (int i = 0; i < CONV_K - 1; ++i) win[i] = win[i + 1];
  }
#pragma unroll
  for (int i = 0; i < CONV_K - 1; ++i) state[(i64)c * (CONV_K - 1) + i] = win[i];
}
#endif

#ifdef GDN_DK
// Per value head h (key head h % GDN_HK), per token t:
//   S *= exp(g); d_j = (v_j - sum_i S[i][j] k_i) * beta; S[i][j] += k_i d_j;
//   o_j = scale * sum_i S[i][j] q_i.
// q, k: [n_tok, HK, DK]; v, o: [n_tok, HV, DV]; g, beta: [n_tok, HV];
// state: [HV, DV, DK] with state[h, j, i] = S[i][j]. Grid: HV * (DV / GDN_COLS) blocks of
// GDN_COLS threads. GDN_BUCKET is the token bucket (1 = decode).
extern "C" __global__ void __launch_bounds__(GDN_COLS)
gated_delta_scan(const float* q, const float* k, const float* v, const float* g, const float* beta,
                 float* state, float* o, int n_tok, float scale) {
  const int blocks_per_head = GDN_DV / GDN_COLS;
  const int h = blockIdx.x / blocks_per_head;
  const int j = (blockIdx.x % blocks_per_head) * GDN_COLS + threadIdx.x;
  const int kh = h % GDN_HK;
  __shared__ float sk[GDN_DK], sq[GDN_DK];
  float S[GDN_DK];
  float* st = state + ((i64)h * GDN_DV + j) * GDN_DK;
#pragma unroll
  for (int i = 0; i < GDN_DK; ++i) S[i] = st[i];
  for (int t = 0; t < n_tok; ++t) {
    __syncthreads();
    for (int i = threadIdx.x; i < GDN_DK; i += GDN_COLS) {
      sk[i] = k[((i64)t * GDN_HK + kh) * GDN_DK + i];
      sq[i] = q[((i64)t * GDN_HK + kh) * GDN_DK + i];
    }
    __syncthreads();
    const float decay = expf(g[(i64)t * GDN_HV + h]);
    const float b = beta[(i64)t * GDN_HV + h];
    float sk_dot = 0.0f;
#pragma unroll
    for (int i = 0; i < GDN_DK; ++i) {
      S[i] *= decay;
      sk_dot += S[i] * sk[i];
    }
    const float d = (v[((i64)t * GDN_HV + h) * GDN_DV + j] - sk_dot) * b;
    float out = 0.0f;
#pragma unroll
    for (int i = 0; i < GDN_DK; ++i) {
      S[i] += sk[i] * d;
      out += S[i] * sq[i];
    }
    o[((i64)t * GDN_HV + h) * GDN_DV + j] = out * scale;
  }
#pragma unroll
  for (int i = 0; i < GDN_DK; ++i) st[i] = S[i];
}
#endif
