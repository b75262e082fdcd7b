// Causal GQA attention over the KV cache (f32): query t of head h attends to cache rows
// 0..pos[t] of kv head h / (ATT_HQ / ATT_HKV). One block of ATT_WARPS warps per (token, head):
// each warp walks a strided subset of the keys with an online softmax, lanes split the head dim;
// the warps' partial (max, sum, acc) are merged at the end. Prefill and decode use the same
// code; ATT_BUCKET is the token bucket it was specialized for (decode: 1).
#include "Common.cuh"

#ifndef ATT_WARPS
#define ATT_WARPS 4
#endif
#define ATT_PER_LANE ((ATT_D + 31) / 32)

extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32)
attention(const float* q, const float* k_cache, const float* v_cache, const int* pos, float* o,
          int n_tok, float scale) {
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

// Decode (one query token) as split-KV attention ("flash decoding"): the live keys 0..pos[0] are
// cut into ATT_SPLITS equal ranges at run time, one block of ATT_WARPS warps per (head, range)
// writes its partial (max, sum, unnormalized acc[D]) to `part`, and attention_combine merges the
// ranges. The grid depends on ATT_SPLITS only, never on the live length, so one captured decode
// graph serves every KV length; a long context keeps Hq * ATT_SPLITS blocks busy instead of Hq.
#ifndef ATT_SPLITS
#define ATT_SPLITS 16
#endif
#define ATT_PART (ATT_D + 2)  // per (head, split): m, l, acc[D]

extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32)
attention_split(const float* q, const float* k_cache, const float* v_cache, const int* pos, float* part, float scale) {
  const int h = blockIdx.x / ATT_SPLITS, split = blockIdx.x % ATT_SPLITS;
  const int kvh = h / (ATT_HQ / ATT_HKV);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_keys = pos[0] + 1;
  const int chunk = (n_keys + ATT_SPLITS - 1) / ATT_SPLITS;
  const int lo = split * chunk, hi = min(lo + chunk, n_keys);
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
extern "C" __global__ void __launch_bounds__(32) attention_combine(const float* part, float* o) {
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

// Prefill (many query tokens) with query tiles: one block of 4 warps per (tile of ATT_TQ = 32
// consecutive queries, head h); keys and values stream through shared memory ATT_TK = 16 rows at
// a time and serve all 32 queries (the per-(token, head) kernel above re-reads every earlier key
// from L2 for each query). Warp w owns queries 8w .. 8w+7; for the scores a half-warp takes one
// query and a lane one key, for P·V a lane owns head dims lane, lane + 32, ...; f32 throughout,
// online softmax per query. Causal: query t sees cache rows 0..pos[t].
#define ATT_TQ 32
#define ATT_TK 16
#define ATT_QPW (ATT_TQ / 4)  // queries per warp

extern "C" __global__ void __launch_bounds__(128)
attention_tiled(const float* q, const float* k_cache, const float* v_cache, const int* pos, float* o, int n_tok,
                float scale) {
  const int n_tiles = (ATT_BUCKET + ATT_TQ - 1) / ATT_TQ;
  const int tile = blockIdx.x % n_tiles, h = blockIdx.x / n_tiles;
  const int t0 = tile * ATT_TQ;
  if (t0 >= n_tok) return;
  const int kvh = h / (ATT_HQ / ATT_HKV);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = lane >> 4, key = lane & 15;
  __shared__ float ks[ATT_TK][ATT_D + 1];  // +1: the score loop reads a column across lanes
  __shared__ float vs[ATT_TK][ATT_D];
  // The tile's last valid query sees the most keys.
  const int t_last = min(t0 + ATT_TQ, n_tok) - 1;
  const int n_keys = pos[t_last] + 1;
  int qpos[ATT_QPW];
  const float* qp[ATT_QPW];
#pragma unroll
  for (int i = 0; i < ATT_QPW; ++i) {
    const int t = t0 + warp * ATT_QPW + i;
    qpos[i] = t < n_tok ? pos[t] : -1;  // -1: a padded query, never written
    qp[i] = q + ((i64)min(t, n_tok - 1) * ATT_HQ + h) * ATT_D;
  }
  float m[ATT_QPW], l[ATT_QPW], acc[ATT_QPW][ATT_PER_LANE];
#pragma unroll
  for (int i = 0; i < ATT_QPW; ++i) {
    m[i] = MEMRA_NEG_INF;
    l[i] = 0.0f;
#pragma unroll
    for (int d = 0; d < ATT_PER_LANE; ++d) acc[i][d] = 0.0f;
  }
  for (int kb = 0; kb < n_keys; kb += ATT_TK) {
    __syncthreads();  // the previous tile's rows are no longer read
    for (int e = threadIdx.x; e < ATT_TK * ATT_D; e += 128) {
      const int r = e / ATT_D, d = e % ATT_D;
      const bool in = kb + r < n_keys;
      ks[r][d] = in ? k_cache[((i64)(kb + r) * ATT_HKV + kvh) * ATT_D + d] : 0.0f;
      vs[r][d] = in ? v_cache[((i64)(kb + r) * ATT_HKV + kvh) * ATT_D + d] : 0.0f;
    }
    __syncthreads();
    // Scores: query pair (i, i + ATT_QPW / 2) per step, half-warps; lane `key` of each half.
    float p_pair[ATT_QPW / 2];
#pragma unroll
    for (int st = 0; st < ATT_QPW / 2; ++st) {
      const int i = st + half * (ATT_QPW / 2);
      const float* qv = qp[i];
      float s = 0.0f;
#pragma unroll 8
      for (int d = 0; d < ATT_D; ++d) s += __ldg(qv + d) * ks[key][d];
      s *= scale;
      const int j = kb + key;
      const bool visible = qpos[i] >= 0 && j <= qpos[i];
      float tile_max = visible ? s : MEMRA_NEG_INF;
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float m_new = fmaxf(m[i], tile_max);
      // m_new == -inf: nothing visible yet for this query (its p are 0, its state unchanged).
      const float p = visible ? expf(s - m_new) : 0.0f;
      float psum = p;
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, off);
      const float corr = m_new == MEMRA_NEG_INF ? 1.0f : expf(m[i] - m_new);
      l[i] = l[i] * corr + psum;
      m[i] = m_new;
      p_pair[st] = p;
      // The other half's query: its corr, m, l are needed by every lane for P·V.
      const int other = st + (1 - half) * (ATT_QPW / 2);
      const float corr_other = __shfl_xor_sync(0xffffffffu, corr, 16);
      m[other] = __shfl_xor_sync(0xffffffffu, m_new, 16);
      l[other] = __shfl_xor_sync(0xffffffffu, l[i], 16);
#pragma unroll
      for (int dd = 0; dd < ATT_PER_LANE; ++dd) {
        acc[i][dd] *= corr;
        acc[other][dd] *= corr_other;
      }
    }
    // P·V: lane owns dims lane + 32 * dd; p(i, j) comes from lane j of query i's half.
#pragma unroll
    for (int st = 0; st < ATT_QPW / 2; ++st) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = st + hh * (ATT_QPW / 2);
#pragma unroll 4
        for (int j = 0; j < ATT_TK; ++j) {
          const float p = __shfl_sync(0xffffffffu, p_pair[st], hh * 16 + j);
#pragma unroll
          for (int dd = 0; dd < ATT_PER_LANE; ++dd) {
            const int d = lane + 32 * dd;
            if (d < ATT_D) acc[i][dd] += p * vs[j][d];
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < ATT_QPW; ++i) {
    if (qpos[i] < 0) continue;
    const int t = t0 + warp * ATT_QPW + i;
    const float inv = 1.0f / l[i];
    float* ov = o + ((i64)t * ATT_HQ + h) * ATT_D;
#pragma unroll
    for (int dd = 0; dd < ATT_PER_LANE; ++dd) {
      const int d = lane + 32 * dd;
      if (d < ATT_D) ov[d] = acc[i][dd] * inv;
    }
  }
}
