// Causal GQA attention over the KV cache (f32): query t of head h attends to cache rows
// 0..pos[t] of kv head h / (ATT_HQ / ATT_HKV). One block of ATT_WARPS warps per (token, head):
// each warp walks a strided subset of the keys with an online softmax, lanes split the head dim;
// the warps' partial (max, sum, acc) are merged at the end. Prefill and decode use the same
// code; ATT_BUCKET is the token bucket it was specialized for (decode: 1).
#include "AttentionParams.h"
#include "Common.cuh"

#ifndef ATT_WARPS
#define ATT_WARPS 4
#endif
#define ATT_PER_LANE ((ATT_D + 31) / 32)

__device__ __forceinline__ void attention_body(const float* q, const float* k_cache, const float* v_cache,
                                               const int* pos, float* o, int n_tok, float scale) {
  const int t = blockIdx.x / ATT_HQ, h = blockIdx.x % ATT_HQ;
  if (t >= n_tok) return;
  const int kvh = h / (ATT_HQ / ATT_HKV);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* qv = q + ((i64)t * ATT_HQ + h) * ATT_D;
  float qr[ATT_PER_LANE], acc[ATT_PER_LANE];
#pragma unroll
  for (int k = 0; k < ATT_PER_LANE; ++k) {
    const int d = lane + 32 * k;
    qr[k] = d < ATT_D ? qv[d] * scale : 0.0f;
    acc[k] = 0.0f;
  }
  float m = MEMRA_NEG_INF, l = 0.0f;
  const int n_keys = pos[t] + 1;
  for (int j = warp; j < n_keys; j += ATT_WARPS) {
    const float* kr = k_cache + ((i64)j * ATT_HKV + kvh) * ATT_D;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < ATT_D) s += qr[k] * kr[d];
    }
    s = warp_sum(s);
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
    const float* vr = v_cache + ((i64)j * ATT_HKV + kvh) * ATT_D;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      acc[k] = acc[k] * corr + (d < ATT_D ? p * vr[d] : 0.0f);
    }
    m = m_new;
  }
  __shared__ float sm[ATT_WARPS], sl[ATT_WARPS];
  __shared__ float sacc[ATT_WARPS][ATT_PER_LANE * 32];
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
#pragma unroll
  for (int k = 0; k < ATT_PER_LANE; ++k) sacc[warp][lane + 32 * k] = acc[k];
  __syncthreads();
  if (warp == 0) {
    float M = MEMRA_NEG_INF;
    for (int w = 0; w < ATT_WARPS; ++w) M = fmaxf(M, sm[w]);
    float L = 0.0f;
    float out[ATT_PER_LANE];
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) out[k] = 0.0f;
    for (int w = 0; w < ATT_WARPS; ++w) {
      if (sl[w] == 0.0f) continue;  // a warp that saw no key
      const float c = expf(sm[w] - M);
      L += sl[w] * c;
#pragma unroll
      for (int k = 0; k < ATT_PER_LANE; ++k) out[k] += sacc[w][lane + 32 * k] * c;
    }
    const float inv = 1.0f / L;
    float* ov = o + ((i64)t * ATT_HQ + h) * ATT_D;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < ATT_D) ov[d] = out[k] * inv;
    }
  }
}

// Decode (one query token) as split-KV attention ("flash decoding"): the live keys (0..pos[0], or
// the window's last keys) are
// cut into ATT_SPLITS equal ranges at run time, one block of ATT_WARPS warps per (head, range)
// writes its partial (max, sum, unnormalized acc[D]) to `part`, and attention_combine merges the
// ranges. The grid depends on ATT_SPLITS only, never on the live length, so one captured decode
// graph serves every KV length; a long context keeps Hq * ATT_SPLITS blocks busy instead of Hq.
#ifndef ATT_SPLITS
#define ATT_SPLITS 16
#endif
#define ATT_PART (ATT_D + 2)  // per (head, split): m, l, acc[D]

__device__ __forceinline__ void attention_split_body(const float* q, const float* k_cache, const float* v_cache,
                                                     const int* pos, float* part, float scale, int window) {
  const int h = blockIdx.x / ATT_SPLITS, split = blockIdx.x % ATT_SPLITS;
  const int kvh = h / (ATT_HQ / ATT_HKV);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // Keys first..pos[0]: all of them, or the last `window` in a sliding window.
  const int first = window > 0 ? max(0, pos[0] - window + 1) : 0, n_keys = pos[0] + 1 - first;
  const int chunk = (n_keys + ATT_SPLITS - 1) / ATT_SPLITS;
  const int lo = first + split * chunk, hi = min(lo + chunk, first + n_keys);
  const float* qv = q + (i64)h * ATT_D;
  float qr[ATT_PER_LANE], acc[ATT_PER_LANE];
#pragma unroll
  for (int k = 0; k < ATT_PER_LANE; ++k) {
    const int d = lane + 32 * k;
    qr[k] = d < ATT_D ? qv[d] * scale : 0.0f;
    acc[k] = 0.0f;
  }
  float m = MEMRA_NEG_INF, l = 0.0f;
  for (int j = lo + warp; j < hi; j += ATT_WARPS) {
    const float* kr = k_cache + ((i64)j * ATT_HKV + kvh) * ATT_D;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < ATT_D) s += qr[k] * kr[d];
    }
    s = warp_sum(s);
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
    const float* vr = v_cache + ((i64)j * ATT_HKV + kvh) * ATT_D;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      acc[k] = acc[k] * corr + (d < ATT_D ? p * vr[d] : 0.0f);
    }
    m = m_new;
  }
  __shared__ float sm[ATT_WARPS], sl[ATT_WARPS];
  __shared__ float sacc[ATT_WARPS][ATT_PER_LANE * 32];
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
#pragma unroll
  for (int k = 0; k < ATT_PER_LANE; ++k) sacc[warp][lane + 32 * k] = acc[k];
  __syncthreads();
  if (warp == 0) {
    float M = MEMRA_NEG_INF;
    for (int w = 0; w < ATT_WARPS; ++w)
      if (sl[w] > 0.0f) M = fmaxf(M, sm[w]);
    float L = 0.0f;
    float out[ATT_PER_LANE];
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) out[k] = 0.0f;
    for (int w = 0; w < ATT_WARPS; ++w) {
      if (sl[w] == 0.0f) continue;  // a warp that saw no key
      const float c = expf(sm[w] - M);
      L += sl[w] * c;
#pragma unroll
      for (int k = 0; k < ATT_PER_LANE; ++k) out[k] += sacc[w][lane + 32 * k] * c;
    }
    float* pv = part + (i64)blockIdx.x * ATT_PART;
    if (lane == 0) {
      pv[0] = M;
      pv[1] = L;  // 0: this range held no key
    }
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < ATT_D) pv[2 + d] = out[k];
    }
  }
}

// o[h] = sum over ranges of acc * e^(m - M) / sum of l * e^(m - M); one warp per head.
__device__ __forceinline__ void attention_combine_body(const float* part, float* o) {
  const int h = blockIdx.x, lane = threadIdx.x;
  const float* ph = part + (i64)h * ATT_SPLITS * ATT_PART;
  float M = MEMRA_NEG_INF;
  for (int s = 0; s < ATT_SPLITS; ++s)
    if (ph[s * ATT_PART + 1] > 0.0f) M = fmaxf(M, ph[s * ATT_PART]);
  float L = 0.0f;
  float out[ATT_PER_LANE];
#pragma unroll
  for (int k = 0; k < ATT_PER_LANE; ++k) out[k] = 0.0f;
  for (int s = 0; s < ATT_SPLITS; ++s) {
    const float l = ph[s * ATT_PART + 1];
    if (l == 0.0f) continue;
    const float c = expf(ph[s * ATT_PART] - M);
    L += l * c;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < ATT_D) out[k] += ph[s * ATT_PART + 2 + d] * c;
    }
  }
  const float inv = 1.0f / L;
#pragma unroll
  for (int k = 0; k < ATT_PER_LANE; ++k) {
    const int d = lane + 32 * k;
    if (d < ATT_D) o[(i64)h * ATT_D + d] = out[k] * inv;
  }
}

// Prefill with GQA grouping: one block of ATT_WARPS warps per (token, kv head) computes all
// ATT_HQ / ATT_HKV query heads that share that kv head, so each key / value row is read from L2
// once per group instead of once per query head (the per-(token, head) kernel above reads it
// ATT_HQ / ATT_HKV times). Warps stride the keys; each keeps an online softmax per head; the warps'
// partials merge at the end, one head per warp.
#define ATT_GROUP (ATT_HQ / ATT_HKV)
// Its static shared memory (m, l and acc per warp and head). A module whose geometry exceeds the
// 48 KiB static limit (the split-KV decode modules use 8 warps) leaves the entry out; the unit
// selects it only where it fits (Attention.cc).
#define ATT_GROUP_SMEM (ATT_WARPS * ATT_GROUP * (2 + ATT_PER_LANE * 32) * 4)
#if ATT_GROUP_SMEM <= 49152

__device__ __forceinline__ void attention_group_body(const float* q, const float* k_cache, const float* v_cache,
                                                     const int* pos, float* o, int n_tok, float scale) {
  const int t = blockIdx.x / ATT_HKV, kvh = blockIdx.x % ATT_HKV;
  if (t >= n_tok) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float qr[ATT_GROUP][ATT_PER_LANE], acc[ATT_GROUP][ATT_PER_LANE], m[ATT_GROUP], l[ATT_GROUP];
#pragma unroll
  for (int g = 0; g < ATT_GROUP; ++g) {
    const float* qv = q + ((i64)t * ATT_HQ + kvh * ATT_GROUP + g) * ATT_D;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      qr[g][k] = d < ATT_D ? qv[d] * scale : 0.0f;
      acc[g][k] = 0.0f;
    }
    m[g] = MEMRA_NEG_INF;
    l[g] = 0.0f;
  }
  const int n_keys = pos[t] + 1;
  for (int j = warp; j < n_keys; j += ATT_WARPS) {
    const float* kr = k_cache + ((i64)j * ATT_HKV + kvh) * ATT_D;
    const float* vr = v_cache + ((i64)j * ATT_HKV + kvh) * ATT_D;
    float kv[ATT_PER_LANE], vv[ATT_PER_LANE];
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      kv[k] = d < ATT_D ? kr[d] : 0.0f;
      vv[k] = d < ATT_D ? vr[d] : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < ATT_GROUP; ++g) {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < ATT_PER_LANE; ++k) s += qr[g][k] * kv[k];
      s = warp_sum(s);
      const float m_new = fmaxf(m[g], s);
      const float corr = expf(m[g] - m_new), p = expf(s - m_new);
      l[g] = l[g] * corr + p;
#pragma unroll
      for (int k = 0; k < ATT_PER_LANE; ++k) acc[g][k] = acc[g][k] * corr + p * vv[k];
      m[g] = m_new;
    }
  }
  __shared__ float sm[ATT_WARPS][ATT_GROUP], sl[ATT_WARPS][ATT_GROUP];
  __shared__ float sacc[ATT_WARPS][ATT_GROUP][ATT_PER_LANE * 32];
#pragma unroll
  for (int g = 0; g < ATT_GROUP; ++g) {
    if (lane == 0) {
      sm[warp][g] = m[g];
      sl[warp][g] = l[g];
    }
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) sacc[warp][g][lane + 32 * k] = acc[g][k];
  }
  __syncthreads();
  for (int g = warp; g < ATT_GROUP; g += ATT_WARPS) {
    float M = MEMRA_NEG_INF;
    for (int w = 0; w < ATT_WARPS; ++w)
      if (sl[w][g] > 0.0f) M = fmaxf(M, sm[w][g]);
    float L = 0.0f, out[ATT_PER_LANE];
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) out[k] = 0.0f;
    for (int w = 0; w < ATT_WARPS; ++w) {
      if (sl[w][g] == 0.0f) continue;  // a warp that saw no key
      const float c = expf(sm[w][g] - M);
      L += sl[w][g] * c;
#pragma unroll
      for (int k = 0; k < ATT_PER_LANE; ++k) out[k] += sacc[w][g][lane + 32 * k] * c;
    }
    const float inv = 1.0f / L;
    float* ov = o + ((i64)t * ATT_HQ + kvh * ATT_GROUP + g) * ATT_D;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < ATT_D) ov[d] = out[k] * inv;
    }
  }
}
#endif  // ATT_GROUP_SMEM

// Entry points: one parameter struct each (AttentionParams.h), unpacked into the bodies above.
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention(const AttentionParams p) {
  memra_grid_dependency();
  attention_body(p.q, p.k_cache, p.v_cache, p.pos, p.o, p.n_tok, p.scale);
}
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_split(const AttentionParams p) {
  memra_grid_dependency();
  attention_split_body(p.q, p.k_cache, p.v_cache, p.pos, p.o, p.scale, p.window);
}
extern "C" __global__ void __launch_bounds__(32) attention_combine(const AttentionCombineParams p) {
  memra_grid_dependency();
  attention_combine_body(p.part, p.o);
}
#if ATT_GROUP_SMEM <= 49152
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_group(const AttentionParams p) {
  memra_grid_dependency();
  attention_group_body(p.q, p.k_cache, p.v_cache, p.pos, p.o, p.n_tok, p.scale);
}
#endif
