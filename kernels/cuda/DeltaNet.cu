// Gated DeltaNet kernels: the causal depthwise conv with its ring state, and the gated delta
// rule scan (sequential in time; GDN_SPLIT lanes own one column j of a head's state S[:, j] in
// registers).
#include "Common.cuh"
#include "DeltaNetParams.h"

#ifdef CONV_CHANNELS
#ifndef CONV_SILU
#define CONV_SILU 0  // 1: y = silu(conv) (conv1d_causal {activation = "silu"})
#endif
__device__ __forceinline__ float conv_out(float s) { return CONV_SILU ? siluf_(s) : s; }
// xin = concat(state, x) over time; y[t, c] = sum_i xin[t+i, c] * w[c, i]; the state keeps the
// last CONV_K-1 rows of xin. x, y: [n_tok, C]; w: [C, K]; state: [C, K-1] (oldest first). One
// thread per channel c (< CONV_CHANNELS).
__device__ __forceinline__ void conv1d_causal_body(int c, const float* x, const float* w, float* state, float* y,
                                                   int n_tok) {
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
    y[(i64)t * CONV_CHANNELS + c] = conv_out(s);
#pragma unroll
    for (int i = 0; i < CONV_K - 1; ++i) win[i] = win[i + 1];
  }
#pragma unroll
  for (int i = 0; i < CONV_K - 1; ++i) state[(i64)c * (CONV_K - 1) + i] = win[i];
}

// The same conv for many tokens, parallel over (run of CONV_RUN tokens, c): a thread slides the
// window down its run, so each input is read once (plus the K - 1 rows before the run); the sum's
// order is the one-token kernel's. The state is read here and replaced afterwards by
// conv1d_state_update (a second launch, so no thread reads a state row another has overwritten).
#define CONV_RUN 16
__device__ __forceinline__ void conv1d_causal_tokens_body(const float* x, const float* w, const float* state, float* y,
                                                          int n_tok) {
  const int runs = (n_tok + CONV_RUN - 1) / CONV_RUN;
  MEMRA_GRID_STRIDE(idx, (i64)runs * CONV_CHANNELS) {
    const int t0 = (int)(idx / CONV_CHANNELS) * CONV_RUN, c = (int)(idx % CONV_CHANNELS);
    float wr[CONV_K], win[CONV_K];
#pragma unroll
    for (int i = 0; i < CONV_K; ++i) wr[i] = w[(i64)c * CONV_K + i];
#pragma unroll
    for (int i = 0; i < CONV_K - 1; ++i) {
      const int tau = t0 - (CONV_K - 1) + i;  // < 0: from the state
      win[i] = tau >= 0 ? x[(i64)tau * CONV_CHANNELS + c] : state[(i64)c * (CONV_K - 1) + (CONV_K - 1) + tau];
    }
#pragma unroll
    for (int r = 0; r < CONV_RUN; ++r) {
      const int t = t0 + r;
      if (t >= n_tok) break;
      win[CONV_K - 1] = x[(i64)t * CONV_CHANNELS + c];
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < CONV_K; ++i) s += win[i] * wr[i];
      y[(i64)t * CONV_CHANNELS + c] = conv_out(s);
#pragma unroll
      for (int i = 0; i < CONV_K - 1; ++i) win[i] = win[i + 1];
    }
  }
}

// state[c] = the last CONV_K-1 rows of concat(state, x) (after conv1d_causal_tokens read it).
__device__ __forceinline__ void conv1d_state_update_body(const float* x, float* state, int n_tok) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= CONV_CHANNELS) return;
  float win[CONV_K - 1];
#pragma unroll
  for (int i = 0; i < CONV_K - 1; ++i) {
    const int tau = n_tok - (CONV_K - 1) + i;
    win[i] = tau >= 0 ? x[(i64)tau * CONV_CHANNELS + c] : state[(i64)c * (CONV_K - 1) + (CONV_K - 1) + tau];
  }
#pragma unroll
  for (int i = 0; i < CONV_K - 1; ++i) state[(i64)c * (CONV_K - 1) + i] = win[i];
}

// seq_conv1d_causal: entry b (blocks b * CONV_BLOCKS ..) runs conv1d_causal_body's loop over its
// rows with slot seq_slot[b]'s ring; the blocks of entry S (the last) zero the rows past
// seq_start[S] (padding). Grid: (S + 1) * CONV_BLOCKS blocks of blockDim.x threads.
#define CONV_BLOCKS ((CONV_CHANNELS + 127) / 128)
__device__ __forceinline__ void seq_conv1d_causal_body(const float* x, const float* w, float* state, float* y,
                                                       const int* seq_slot, const int* seq_start, int n_seq,
                                                       int n_tok) {
  const int b = blockIdx.x / CONV_BLOCKS;
  const int c = (blockIdx.x % CONV_BLOCKS) * blockDim.x + threadIdx.x;
  if (c >= CONV_CHANNELS) return;
  if (b == n_seq) {
    for (int t = seq_start[n_seq]; t < n_tok; ++t) y[(i64)t * CONV_CHANNELS + c] = 0.0f;
    return;
  }
  const int s = seq_slot[b], r0 = seq_start[b], r1 = seq_start[b + 1];
  if (s < 0 || r1 <= r0) return;
  conv1d_causal_body(c, x + (i64)r0 * CONV_CHANNELS, w, state + (i64)s * CONV_CHANNELS * (CONV_K - 1),
                     y + (i64)r0 * CONV_CHANNELS, r1 - r0);
}

// Entry points (DeltaNetParams.h).
extern "C" __global__ void seq_conv1d_causal(const SeqConv1dParams p) {
  memra_grid_dependency();
  seq_conv1d_causal_body(p.x, p.w, p.state, p.y, p.seq_slot, p.seq_start, p.n_seq, p.n_tok);
}
extern "C" __global__ void conv1d_causal(const Conv1dParams p) {
  memra_grid_dependency();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < CONV_CHANNELS) conv1d_causal_body(c, p.x, p.w, p.state, p.y, p.n_tok);
}
extern "C" __global__ void conv1d_causal_tokens(const Conv1dParams p) {
  memra_grid_dependency();
  conv1d_causal_tokens_body(p.x, p.w, p.state, p.y, p.n_tok);
}
extern "C" __global__ void conv1d_state_update(const Conv1dParams p) {
  memra_grid_dependency();
  conv1d_state_update_body(p.x, p.state, p.n_tok);
}
#endif

#ifdef GDN_DK
// Per value head h (key head h % GDN_HK), per token t:
//   S *= exp(g); d_j = (v_j - sum_i S[i][j] k_i) * beta; S[i][j] += k_i d_j;
//   o_j = scale * sum_i S[i][j] q_i.
// q, k: [n_tok, HK, DK]; v, o: [n_tok, HV, DV]; g, beta: [n_tok, HV];
// state: [HV, DV, DK] with state[h, j, i] = S[i][j]. Grid: HV * (DV / GDN_COLS) blocks of
// GDN_COLS * GDN_SPLIT threads. GDN_BUCKET is the token bucket (1 = decode).
//
// The recurrence is sequential in t, so a step's latency is the cost: GDN_SPLIT lanes share one
// column j (lane p holds S[i][j] for i = p, p + SPLIT, ...; the sums close with two shuffles), the
// dot products use two accumulators, and the next token's k, q, v, g, beta are loaded while this
// one computes (k, q double-buffered in shared memory, one barrier per token).
// GDN_L2 = 1 (gated_delta_scan {qk_l2_eps}): q and k are l2-normalized over DK. The squares are
// summed when a token is staged (per warp, into shared memory beside k and q), and the norms scale
// the sums instead of the inputs: S . k^ = (S . k) / |k|, S += k^ d = k (d / |k|), o = (S . q) / |q|.
#ifndef GDN_SPLIT
#define GDN_SPLIT 4
#endif
#define GDN_PER (GDN_DK / GDN_SPLIT)
#define GDN_THREADS (GDN_COLS * GDN_SPLIT)
#define GDN_KQ_PER_THREAD ((GDN_DK + GDN_THREADS - 1) / GDN_THREADS)
#define GDN_WARPS ((GDN_THREADS + 31) / 32)
#ifndef GDN_L2
#define GDN_L2 0
#endif

__device__ __forceinline__ float quad_sum(float v) {
#pragma unroll
  for (int o = 1; o < GDN_SPLIT; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// `blk`: this block's index among the HV * (DV / GDN_COLS) blocks of one sequence.
__device__ __forceinline__ void gated_delta_scan_body(int blk, const float* q, const float* k, const float* v,
                                                      const float* g, const float* beta, float* state, float* o,
                                                      int n_tok, float scale, float qk_eps) {
  const int blocks_per_head = GDN_DV / GDN_COLS;
  const int h = blk / blocks_per_head;
  const int part = threadIdx.x % GDN_SPLIT;
  const int j = (blk % blocks_per_head) * GDN_COLS + threadIdx.x / GDN_SPLIT;
  const int kh = h % GDN_HK;
  __shared__ float sk[2][GDN_DK], sq[2][GDN_DK];
  __shared__ float skk[2][GDN_WARPS], sqq[2][GDN_WARPS];  // GDN_L2: per-warp sums of squares
  float S[GDN_PER];
  float* st = state + ((i64)h * GDN_DV + j) * GDN_DK;
#pragma unroll
  for (int i = 0; i < GDN_PER; ++i) S[i] = st[i * GDN_SPLIT + part];
  // Token t's inputs in registers: k, q (this thread's share), v_j, g, beta.
  float rk[GDN_KQ_PER_THREAD], rq[GDN_KQ_PER_THREAD], rv = 0.0f, rg = 0.0f, rb = 0.0f;
  auto load = [&](int t) {
#pragma unroll
    for (int e = 0; e < GDN_KQ_PER_THREAD; ++e) {
      const int i = threadIdx.x + e * GDN_THREADS;
      rk[e] = i < GDN_DK ? k[((i64)t * GDN_HK + kh) * GDN_DK + i] : 0.0f;
      rq[e] = i < GDN_DK ? q[((i64)t * GDN_HK + kh) * GDN_DK + i] : 0.0f;
    }
    rv = v[((i64)t * GDN_HV + h) * GDN_DV + j];
    rg = g[(i64)t * GDN_HV + h];
    rb = beta[(i64)t * GDN_HV + h];
  };
  auto stage = [&](int buf) {
    float kk = 0.0f, qq = 0.0f;
#pragma unroll
    for (int e = 0; e < GDN_KQ_PER_THREAD; ++e) {
      const int i = threadIdx.x + e * GDN_THREADS;
      if (i < GDN_DK) {
        sk[buf][i] = rk[e];
        sq[buf][i] = rq[e];
      }
      kk += rk[e] * rk[e];  // 0 past GDN_DK
      qq += rq[e] * rq[e];
    }
    if (GDN_L2) {
      kk = warp_sum(kk);
      qq = warp_sum(qq);
      if ((threadIdx.x & 31) == 0) {
        skk[buf][threadIdx.x >> 5] = kk;
        sqq[buf][threadIdx.x >> 5] = qq;
      }
    }
  };
  if (n_tok > 0) {
    load(0);
    stage(0);
  }
  __syncthreads();
  for (int t = 0; t < n_tok; ++t) {
    const int buf = t & 1;
    const float decay = expf(rg), b = rb, vj = rv;
    float inv_k = 1.0f, inv_q = 1.0f;
    if (GDN_L2) {
      float kk = 0.0f, qq = 0.0f;
#pragma unroll
      for (int w = 0; w < GDN_WARPS; ++w) kk += skk[buf][w], qq += sqq[buf][w];
      inv_k = 1.0f / fmaxf(sqrtf(kk), qk_eps);
      inv_q = 1.0f / fmaxf(sqrtf(qq), qk_eps);
    }
    if (t + 1 < n_tok) load(t + 1);  // in flight while this token computes
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < GDN_PER; i += 2) {
      S[i] *= decay;
      a0 += S[i] * sk[buf][i * GDN_SPLIT + part];
      S[i + 1] *= decay;
      a1 += S[i + 1] * sk[buf][(i + 1) * GDN_SPLIT + part];
    }
    const float d = (vj - quad_sum(a0 + a1) * inv_k) * b * inv_k;  // the update's k^ = k * inv_k
    float o0 = 0.0f, o1 = 0.0f;
#pragma unroll
    for (int i = 0; i < GDN_PER; i += 2) {
      S[i] += sk[buf][i * GDN_SPLIT + part] * d;
      o0 += S[i] * sq[buf][i * GDN_SPLIT + part];
      S[i + 1] += sk[buf][(i + 1) * GDN_SPLIT + part] * d;
      o1 += S[i + 1] * sq[buf][(i + 1) * GDN_SPLIT + part];
    }
    const float out = quad_sum(o0 + o1) * inv_q;
    if (part == 0) o[((i64)t * GDN_HV + h) * GDN_DV + j] = out * scale;
    if (t + 1 < n_tok) stage(buf ^ 1);  // buf ^ 1 was last read before the previous barrier
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < GDN_PER; ++i) st[i * GDN_SPLIT + part] = S[i];
}

extern "C" __global__ void __launch_bounds__(GDN_THREADS) gated_delta_scan(const GatedDeltaScanParams p) {
  memra_grid_dependency();
  gated_delta_scan_body(blockIdx.x, p.q, p.k, p.v, p.g, p.beta, p.state, p.o, p.n_tok, p.scale, p.qk_eps);
}

// seq_gated_delta_scan: entry b (blocks b * GDN_BLOCKS ..) scans its rows from slot seq_slot[b]'s
// state; the blocks of entry S zero the output rows past seq_start[S] (padding).
#define GDN_BLOCKS (GDN_HV * (GDN_DV / GDN_COLS))
extern "C" __global__ void __launch_bounds__(GDN_THREADS) seq_gated_delta_scan(const SeqGatedDeltaScanParams p) {
  memra_grid_dependency();
  const int b = blockIdx.x / GDN_BLOCKS, blk = blockIdx.x % GDN_BLOCKS;
  if (b == p.n_seq) {
    const int per_row = GDN_HV * GDN_DV;
    for (int t = p.seq_start[p.n_seq]; t < p.n_tok; ++t)
      for (int i = blk * GDN_THREADS + threadIdx.x; i < per_row; i += GDN_BLOCKS * GDN_THREADS)
        p.o[(i64)t * per_row + i] = 0.0f;
    return;
  }
  const int s = p.seq_slot[b], r0 = p.seq_start[b], n = p.seq_start[b + 1] - r0;
  if (s < 0 || n <= 0) return;
  gated_delta_scan_body(blk, p.q + (i64)r0 * GDN_HK * GDN_DK, p.k + (i64)r0 * GDN_HK * GDN_DK,
                        p.v + (i64)r0 * GDN_HV * GDN_DV, p.g + (i64)r0 * GDN_HV, p.beta + (i64)r0 * GDN_HV,
                        p.state + (i64)s * GDN_HV * GDN_DV * GDN_DK, p.o + (i64)r0 * GDN_HV * GDN_DV, n, p.scale,
                        p.qk_eps);
}
#endif

#ifdef DNS_DK
#include "DeltaRuleColumn.cuh"
// delta_net_step: one token of a delta-net layer (ir/Ops.def delta_net_step). A value head h's
// state columns are spread over DNS_SPLIT blocks (select-kernels{delta-step-split}), each taking
// DNS_DVB = DV / DNS_SPLIT columns; the DNS_HV / DNS_HK value heads of one key head and their
// column blocks form one thread-block cluster (consecutive blocks: blockIdx.x = kh * CLUSTER +
// r * DNS_SPLIT + s, h = kh + r * DNS_HK, columns s * DNS_DVB ...).
//   1. the conv of the block's channels (its key head's q and k, its own v columns), silu, into
//      shared memory; each v channel's ring row written back by its block, each q / k row by the
//      cluster's first block after a cluster barrier (every block of the cluster has read it then);
//   2. the gates of head h, and the q / k l2 norms (every warp sums them, no barrier);
//   3. the delta rule: DNS_LANES lanes own a state column S[:, j] (float4 pieces i = 4 lane + 32 m),
//      a warp DNS_COLS columns, the block its DNS_DVB columns in DNS_PASSES passes, the state read
//      once into registers up front so its loads are all in flight together;
//   4. the gated rms norm over the head's DV outputs: each block sums its columns' squares (every
//      warp, no barrier); split, the head's blocks add their partials in column order through
//      distributed shared memory, so every block of the head scales by the same bits. With
//      MEMRA_Q8X_OFF the outputs' q8 companion too (kernels/cuda/Q8Companion.h; a block's columns
//      are whole 32-element units).
// Arithmetic as the CPU kernels it replaces (kernels/cpu): q / k normalized before the products,
// the decay, the update and the output per column in that order, rms scale then weight then gate.
#ifndef DNS_SPLIT
#define DNS_SPLIT 1
#endif
#ifndef DNS_THREADS
#define DNS_THREADS 512
#endif
#ifndef DNS_LANES
#define DNS_LANES 8
#endif
#define DNS_R (DNS_HV / DNS_HK)
#define DNS_CLUSTER (DNS_R * DNS_SPLIT)
#define DNS_DVB (DNS_DV / DNS_SPLIT)  // the block's value columns
#define DNS_COLS (32 / DNS_LANES)
#define DNS_PASSES ((DNS_DVB + DNS_COLS * (DNS_THREADS / 32) - 1) / (DNS_COLS * (DNS_THREADS / 32)))
#define DNS_PIECES (DNS_DK / (4 * DNS_LANES))
#define DNS_CH (2 * DNS_DK + DNS_DVB)  // the block's conv channels
#define DNS_C (2 * DNS_HK * DNS_DK + DNS_HV * DNS_DV)
#if DNS_DVB > DNS_THREADS
#error "delta_net_step: a block's outputs take one thread each (DNS_DV / DNS_SPLIT <= DNS_THREADS)"
#endif
#if DNS_DV % DNS_SPLIT != 0
#error "delta_net_step: DNS_SPLIT must divide the value head dim"
#endif
#if DNS_THREADS % 32 != 0
#error "delta_net_step: whole warps (DNS_THREADS a multiple of 32)"
#endif
#if defined(MEMRA_Q8X_OFF) && DNS_DVB % 32 != 0
#error "delta_net_step: a q8 companion needs whole 32-element units a block (DNS_DV / DNS_SPLIT % 32 == 0)"
#endif

struct DnsShared {
  __align__(16) float sq[DNS_DK];
  __align__(16) float sk[DNS_DK];
  __align__(16) float sv[DNS_DVB];
  __align__(16) float so[DNS_DVB];
  float ss;  // the block's sum of squares (read by the head's other blocks)
};

// The block's t-th conv channel: q of key head kh, then k of it, then v columns j0... of value head h.
__device__ __forceinline__ int dns_channel(int t, int kh, int h, int j0) {
  return t < DNS_DK       ? kh * DNS_DK + t
         : t < 2 * DNS_DK ? DNS_HK * DNS_DK + kh * DNS_DK + (t - DNS_DK)
                          : 2 * DNS_HK * DNS_DK + h * DNS_DV + j0 + (t - 2 * DNS_DK);
}

extern "C" __global__ void __launch_bounds__(DNS_THREADS) delta_net_step(const DeltaNetStepParams p) {
  const int kh = blockIdx.x / DNS_CLUSTER, rank = blockIdx.x % DNS_CLUSTER;
  const int r = rank / DNS_SPLIT, h = kh + r * DNS_HK, j0 = (rank % DNS_SPLIT) * DNS_DVB;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  MEMRA_BLOCK_SHARED(DnsShared, sh);
  float* sq = sh.sq;
  float* sk = sh.sk;
  float* sv = sh.sv;
  float* so = sh.so;
#define DNS_CH_PER_THREAD ((DNS_CH + DNS_THREADS - 1) / DNS_THREADS)
  // Weights before the grid dependency wait (they do not depend on the kernels before); after it,
  // every activation and state load is issued at once (each dependent round trip is ~1 us).
  float wc[DNS_CH_PER_THREAD][CONV_K];
#pragma unroll
  for (int e = 0; e < DNS_CH_PER_THREAD; ++e) {
    const int t = threadIdx.x + e * DNS_THREADS;
    const int c = dns_channel(t < DNS_CH ? t : 0, kh, h, j0);
#pragma unroll
    for (int i = 0; i < CONV_K; ++i) wc[e][i] = p.conv_w[(i64)c * CONV_K + i];
  }
  const float dt_bias = p.dt_bias[h], ssm_a = p.ssm_a[h];
  const float nw = threadIdx.x < DNS_DVB ? p.norm_w[j0 + threadIdx.x] : 0.0f;
  memra_grid_dependency();
  const float zj = threadIdx.x < DNS_DVB ? p.z[(i64)h * DNS_DV + j0 + threadIdx.x] : 0.0f;
  const float bh = p.b[h], ah = p.a[h];
  // The block's state columns, so their loads (64 KB a head at 128 x 128) are in flight while the
  // conv runs. Lane group g8 = lane / DNS_LANES owns column j0 + jl of pass ps; its lane p8 holds
  // S[i][j] for i = 4 p8 + 32 m + 0..3.
  const int g8 = lane / DNS_LANES, p8 = lane % DNS_LANES;
  float4 S[DNS_PASSES][DNS_PIECES];
  float* st = p.delta_state + ((i64)h * DNS_DV + j0) * DNS_DK;
#pragma unroll
  for (int ps = 0; ps < DNS_PASSES; ++ps) {
    const int jl = (ps * (DNS_THREADS / 32) + warp) * DNS_COLS + g8;
#pragma unroll
    for (int m = 0; m < DNS_PIECES; ++m)
      S[ps][m] = jl < DNS_DVB ? *reinterpret_cast<const float4*>(st + (i64)jl * DNS_DK + 4 * p8 + 32 * m)
                              : make_float4(0.f, 0.f, 0.f, 0.f);
  }

  // 1. The conv: a thread per channel (a loop past DNS_THREADS channels). The windows of the q / k
  // channels stay in registers until the cluster barrier (DNS_CH_PER_THREAD a thread).
  float keep[DNS_CH_PER_THREAD][CONV_K - 1];
#pragma unroll
  for (int e = 0; e < DNS_CH_PER_THREAD; ++e) {
    const int t = threadIdx.x + e * DNS_THREADS;
    if (t >= DNS_CH) break;
    const int c = dns_channel(t, kh, h, j0);
    float win[CONV_K];
#pragma unroll
    for (int i = 0; i < CONV_K - 1; ++i) win[i] = p.conv_state[(i64)c * (CONV_K - 1) + i];
    win[CONV_K - 1] = p.x[c];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < CONV_K; ++i) s += win[i] * wc[e][i];
    const float out = siluf_(s);
    if (t < DNS_DK)
      sq[t] = out;
    else if (t < 2 * DNS_DK)
      sk[t - DNS_DK] = out;
    else
      sv[t - 2 * DNS_DK] = out;
#pragma unroll
    for (int i = 0; i < CONV_K - 1; ++i) keep[e][i] = win[i + 1];
    if (t >= 2 * DNS_DK) {  // v: this block's own channel
#pragma unroll
      for (int i = 0; i < CONV_K - 1; ++i) p.conv_state[(i64)c * (CONV_K - 1) + i] = keep[e][i];
    }
  }
  // Every block of the key head has read its q / k rows (and the block sees sq, sk, sv).
#if DNS_CLUSTER > 1
  memra_cluster_sync();
#else
  __syncthreads();
#endif
  if (rank == 0) {
#pragma unroll
    for (int e = 0; e < DNS_CH_PER_THREAD; ++e) {
      const int t = threadIdx.x + e * DNS_THREADS;
      if (t >= 2 * DNS_DK) break;
      const int c = dns_channel(t, kh, h, j0);
#pragma unroll
      for (int i = 0; i < CONV_K - 1; ++i) p.conv_state[(i64)c * (CONV_K - 1) + i] = keep[e][i];
    }
  }

  // 2. Gates and norms (every thread: a few loads from shared memory and two warp sums).
  const DeltaHeadGates gates = delta_head_gates(bh, ah, dt_bias, ssm_a, sk, sq, DNS_DK, p.qk_eps);
  const float beta = gates.beta, decay = gates.decay, inv_k = gates.inv_k, inv_q = gates.inv_q;

  // 3. The delta rule (the state went into registers above).
  float kn[DNS_PIECES][4], qn[DNS_PIECES][4];
#pragma unroll
  for (int m = 0; m < DNS_PIECES; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      kn[m][e] = sk[4 * p8 + 32 * m + e] * inv_k;
      qn[m][e] = sq[4 * p8 + 32 * m + e] * inv_q;
    }
#pragma unroll
  for (int ps = 0; ps < DNS_PASSES; ++ps) {
    const int jl = (ps * (DNS_THREADS / 32) + warp) * DNS_COLS + g8;
    const float out = delta_rule_column<DNS_LANES>(
        S[ps], [&](int m, int e) { return kn[m][e]; }, [&](int m, int e) { return qn[m][e]; }, decay, beta,
        jl < DNS_DVB ? sv[jl] : 0.0f);
    if (jl < DNS_DVB) {
#pragma unroll
      for (int m = 0; m < DNS_PIECES; ++m)
        *reinterpret_cast<float4*>(st + (i64)jl * DNS_DK + 4 * p8 + 32 * m) = S[ps][m];
      if (p8 == 0) so[jl] = out * p.scale;
    }
  }
  __syncthreads();

  // 4. The gated rms norm of head h's outputs.
  float ss = 0.0f;
  for (int i = lane; i < DNS_DVB; i += 32) ss += so[i] * so[i];
  ss = warp_sum(ss);
#if DNS_SPLIT > 1
  if (threadIdx.x == 0) sh.ss = ss;
  memra_cluster_sync();  // every block's partial written and visible
  ss = 0.0f;
#pragma unroll
  for (int b = 0; b < DNS_SPLIT; ++b) ss += *memra_cluster_map(&sh.ss, r * DNS_SPLIT + b);
  memra_cluster_arrive();  // this block is done reading the others' partials
#endif
  const float rs = 1.0f / sqrtf(ss / (float)DNS_DV + p.eps);
  if (threadIdx.x < DNS_DVB) {
    const float y = ((so[threadIdx.x] * rs) * nw) * siluf_(zj);
    p.y[(i64)h * DNS_DV + j0 + threadIdx.x] = y;
#ifdef MEMRA_Q8X_OFF
    q8x_store(p.y, (i64)h * DNS_DV + j0 + threadIdx.x, y);  // warp-uniform: DNS_DVB % 32 == 0 (the unit)
#endif
  }
#if DNS_SPLIT > 1
  memra_cluster_wait();  // no block leaves while another may still read its partial
#endif
}
#endif
