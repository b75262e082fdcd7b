// Causal GQA attention over the KV cache (elements of storage type ATT_KT / ATT_VT: 0 f32, 1 f16,
// 2 bf16, 3 q8_0, Common.cuh): query t of head h attends to cache rows
// 0..pos[t] of kv head h / (ATT_HQ / ATT_HKV). One block of ATT_WARPS warps per (token, head):
// each warp walks a strided subset of the keys with an online softmax, lanes split the head dim;
// the warps' partial (max, sum, acc) are merged at the end. Prefill and decode use the same
// code; ATT_BUCKET is the token bucket it was specialized for (decode: 1).
#include "AttentionParams.h"
#include "Common.cuh"

#ifndef ATT_WARPS
#define ATT_WARPS 4
#endif
#ifndef ATT_KT
#define ATT_KT 0
#endif
#ifndef ATT_VT
#define ATT_VT 0
#endif
// ATT_RING > 0: the caches are sliding-window rings of that many rows, key j in row j % ATT_RING
// (ir/Ops.def kv_append ring).
#ifndef ATT_RING
#define ATT_RING 0
#endif
__device__ __forceinline__ i64 att_row(int j) { return ATT_RING > 0 ? (i64)(j % ATT_RING) : (i64)j; }
#define ATT_PER_LANE ((ATT_D + 31) / 32)
#define ATT_GROUP (ATT_HQ / ATT_HKV)

__device__ __forceinline__ void attention_body(const float* q, const void* k_cache, const void* v_cache, const int* pos,
                                               float* o, int n_tok, float scale, int window) {
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
  // Keys first..pos[t]: all of them, or the last `window` in a sliding window.
  const int n_keys = pos[t] + 1, first = window > 0 ? max(0, n_keys - window) : 0;
  for (int j = first + warp; j < n_keys; j += ATT_WARPS) {
    const i64 row = (att_row(j) * ATT_HKV + kvh) * ATT_D;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < ATT_D) s += qr[k] * load_as_f32<ATT_KT>(k_cache, row + d);
    }
    s = warp_sum(s);
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      acc[k] = acc[k] * corr + (d < ATT_D ? p * load_as_f32<ATT_VT>(v_cache, row + d) : 0.0f);
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

// Decode (one query token) as split-KV attention ("flash decoding") with GQA: one block of
// ATT_WARPS warps per (kv head, ATT_GH of its query heads, range of keys) reads each cache row of
// the range once for those heads. The live keys (0..pos[0], or the window's last keys) are cut at
// run time into chunks of max(ceil(n / ATT_SPLITS), ATT_MIN_CHUNK) keys: a short context fills
// few ranges (the blocks of the others write nothing and the merge reads only the live ones), a
// long one all of them, and the grid never depends on the length, so one captured decode graph
// serves every KV length. Lanes own ATT_DL contiguous
// elements of a row (the unit asks D % 64 == 0, so 16-bit rows load as whole words); a warp takes
// ATT_UNROLL keys at a time, every K and V row's load issued before the first is used, so each
// warp keeps that many rows in flight (the bandwidth a long context needs). Scores are in the
// log2 domain (q pre-scaled by log2 e; exp2 throughout). attention_combine merges the ranges, or
// with ATT_MERGE the last block of each head chunk does (merge_if_last: one launch, not two).
#ifdef ATT_SPLITS
#define ATT_DL (ATT_D / 32)
#define ATT_UNROLL ((ATT_KT == 0 || ATT_VT == 0) ? 2 : 4)
#define ATT_MIN_CHUNK (ATT_WARPS * ATT_UNROLL * 2)
#define ATT_PART (ATT_D + 4)  // per (head, range): m, l, 2 pad, acc[D] (16-byte aligned)
#define ATT_LOG2E 1.4426950408889634f

// The split block's per-warp accumulators of its heads in shared memory: write_partials merges
// its warps through them, then the merge (merge_ranges) reuses them.
__device__ __forceinline__ float (*att_sacc())[ATT_GH][ATT_D] {
  __shared__ __align__(16) float sacc[ATT_WARPS][ATT_GH][ATT_D];
  return sacc;
}

// The range [lo, hi) of live keys a split-KV block reads: the keys first..pos (all of them, or
// the window's last), cut into ATT_SPLITS chunks of at least ATT_MIN_CHUNK keys.
struct KeyRange {
  int lo, hi;
};
__device__ __forceinline__ KeyRange split_range(int p, int window, int split) {
  const int first = window > 0 ? max(0, p - window + 1) : 0, n_keys = p + 1 - first;
  const int chunk = max((n_keys + ATT_SPLITS - 1) / ATT_SPLITS, ATT_MIN_CHUNK);
  const int lo = first + min(split * chunk, n_keys);
  return {lo, min(lo + chunk, first + n_keys)};
}

// The ranges split_range gives keys (0 .. live - 1; every later one is empty): what the merge
// reads. A short context has few (ceil(n / ATT_MIN_CHUNK)), so its empty blocks neither write
// partials nor have them read.
__device__ __forceinline__ int live_ranges(int p, int window) {
  const int first = window > 0 ? max(0, p - window + 1) : 0, n_keys = p + 1 - first;
  const int chunk = max((n_keys + ATT_SPLITS - 1) / ATT_SPLITS, ATT_MIN_CHUNK);
  return min((n_keys + chunk - 1) / chunk, ATT_SPLITS);
}

// A block's online softmax per query head: lane-owned q (pre-scaled, log2 domain), acc, max, sum.
struct SplitSoftmax {
  float qr[ATT_GH][ATT_DL], acc[ATT_GH][ATT_DL], m[ATT_GH], l[ATT_GH];
  __device__ __forceinline__ void init(const float* q0, float qscale, int lane) {
#pragma unroll
    for (int g = 0; g < ATT_GH; ++g) {
#pragma unroll
      for (int k = 0; k < ATT_DL; ++k) {
        qr[g][k] = q0[(i64)g * ATT_D + lane * ATT_DL + k] * qscale;
        acc[g][k] = 0.0f;
      }
      m[g] = MEMRA_NEG_INF;
      l[g] = 0.0f;
    }
  }
  // Keys j0..j0+n-1 (n <= kN; the rest masked), their rows already loaded.
  template <int kN, class KRow, class VRow>
  __device__ __forceinline__ void add_keys(const KRow* kr, const VRow* vr, int n) {
#pragma unroll
    for (int g = 0; g < ATT_GH; ++g) {
      float s[kN], m_new = m[g];
#pragma unroll
      for (int u = 0; u < kN; ++u) {
        float d = 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_DL; ++k) d += qr[g][k] * kr[u].get(k);
        s[u] = u < n ? warp_sum(d) : MEMRA_NEG_INF;
        m_new = fmaxf(m_new, s[u]);
      }
      const float corr = exp2f(m[g] - m_new);
      l[g] *= corr;
#pragma unroll
      for (int k = 0; k < ATT_DL; ++k) acc[g][k] *= corr;
#pragma unroll
      for (int u = 0; u < kN; ++u) {
        const float p = exp2f(s[u] - m_new);  // 0 past n
        l[g] += p;
#pragma unroll
        for (int k = 0; k < ATT_DL; ++k) acc[g][k] += p * vr[u].get(k);
      }
      m[g] = m_new;
    }
  }
  // The cache rows of keys lo..hi-1 of kv head kvh, ATT_UNROLL a warp at a time.
  __device__ __forceinline__ void add_cache_keys(const void* k_cache, const void* v_cache, int kvh, int lo, int hi,
                                                 int warp, int lane) {
    for (int j0 = lo + warp * ATT_UNROLL; j0 < hi; j0 += ATT_WARPS * ATT_UNROLL) {
      PackedElems<ATT_KT, ATT_DL> kr[ATT_UNROLL];
      PackedElems<ATT_VT, ATT_DL> vr[ATT_UNROLL];
#pragma unroll
      for (int u = 0; u < ATT_UNROLL; ++u) {
        const i64 row = (att_row(min(j0 + u, hi - 1)) * ATT_HKV + kvh) * ATT_D + lane * ATT_DL;
        kr[u].load(k_cache, row);
        vr[u].load(v_cache, row);
      }
      add_keys<ATT_UNROLL>(kr, vr, hi - j0);
    }
  }
  // The warps' partials merged through shared memory into this range's (m, l, acc) per head.
  __device__ __forceinline__ void write_partials(float* part, int h0, int split, int warp, int lane) {
    __shared__ float sm[ATT_WARPS][ATT_GH], sl[ATT_WARPS][ATT_GH];
    float(*sacc)[ATT_GH][ATT_D] = att_sacc();
#pragma unroll
    for (int g = 0; g < ATT_GH; ++g) {
      if (lane == 0) {
        sm[warp][g] = m[g];
        sl[warp][g] = l[g];
      }
#pragma unroll
      for (int k = 0; k < ATT_DL; ++k) sacc[warp][g][lane * ATT_DL + k] = acc[g][k];
    }
    __syncthreads();
    for (int g = warp; g < ATT_GH; g += ATT_WARPS) {
      float M = MEMRA_NEG_INF;
      for (int w = 0; w < ATT_WARPS; ++w)
        if (sl[w][g] > 0.0f) M = fmaxf(M, sm[w][g]);
      float L = 0.0f, out[ATT_DL];
#pragma unroll
      for (int k = 0; k < ATT_DL; ++k) out[k] = 0.0f;
      for (int w = 0; w < ATT_WARPS; ++w) {
        if (sl[w][g] == 0.0f) continue;  // a warp that saw no key
        const float c = exp2f(sm[w][g] - M);
        L += sl[w][g] * c;
#pragma unroll
        for (int k = 0; k < ATT_DL; ++k) out[k] += sacc[w][g][lane * ATT_DL + k] * c;
      }
      float* pv = part + ((i64)(h0 + g) * ATT_SPLITS + split) * ATT_PART;
      if (lane == 0) {
        pv[0] = M;
        pv[1] = L;  // 0: this range held no key
      }
#pragma unroll
      for (int k = 0; k < ATT_DL; ++k) pv[4 + lane * ATT_DL + k] = out[k];
    }
  }
};

__device__ __forceinline__ void attention_split_body(const float* q, const void* k_cache, const void* v_cache,
                                                     const int* pos, float* part, float scale, int window) {
  const int split = blockIdx.x % ATT_SPLITS, hg = blockIdx.x / ATT_SPLITS;  // hg: (kv head, head chunk)
  const int h0 = hg * ATT_GH, kvh = h0 / ATT_GROUP;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const KeyRange r = split_range(pos[0], window, split);
  if (r.lo >= r.hi) return;  // no key here (a short context): the merge does not read this range
  SplitSoftmax st;
  st.init(q + (i64)h0 * ATT_D, scale * ATT_LOG2E, lane);
  st.add_cache_keys(k_cache, v_cache, kvh, r.lo, r.hi, warp, lane);
  st.write_partials(part, h0, split, warp, lane);
}

#define ATT_CW 4
static_assert(ATT_CW == ATT_WARPS, "the merge reuses the split's shared accumulators (att_sacc)");
// ATT_MERGE_EARLY (attention_combine; select-kernels{combine-early-loads}): the gate's loads go out
// with pos's, and once the live count is known the maxima pass's first range a thread and the sum
// pass's first ATT_MERGE_PRE ranges a warp load together (the sum pass's loads no longer wait for
// the maxima): two dependent round trips instead of four. Only live ranges are read (the others
// hold no write of this step: compute-sanitizer's initcheck), and the sums keep their order: the
// bits of the form without.
#ifndef ATT_MERGE_EARLY
#define ATT_MERGE_EARLY 0
#endif
#define ATT_MERGE_PRE (ATT_MERGE_EARLY ? 4 : 1)
#define ATT_MERGE_GATE ((ATT_D + ATT_CW * 32 - 1) / (ATT_CW * 32))  // gate values a thread writes

// The merge's first loads: the gate (before the live count is known), then range threadIdx.x of
// the maxima pass (m, l) and ranges warp, warp + ATT_CW, ... (ATT_MERGE_PRE of them) of the sum pass
// per head, each only if live (else l = 0: not used).
template <int kGH>
struct MergeFirstLoads {
  float m1[kGH], l1[kGH];
  float m2[kGH][ATT_MERGE_PRE], l2[kGH][ATT_MERGE_PRE], a2[kGH][ATT_MERGE_PRE][ATT_DL];
  float gv[kGH][ATT_MERGE_GATE];
  __device__ __forceinline__ void load_ranges(const float* part, int h0, int live) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int g = 0; g < kGH; ++g) {
      const float* ph = part + (i64)(h0 + g) * ATT_SPLITS * ATT_PART;
      const bool live1 = (int)threadIdx.x < live;
      m1[g] = live1 ? __ldcg(ph + threadIdx.x * ATT_PART) : 0.0f;
      l1[g] = live1 ? __ldcg(ph + threadIdx.x * ATT_PART + 1) : 0.0f;
#pragma unroll
      for (int i = 0; i < ATT_MERGE_PRE; ++i) {
        const bool live2 = warp + i * ATT_CW < live;
        const float* pv = ph + (warp + i * ATT_CW) * ATT_PART;
        m2[g][i] = live2 ? __ldcg(pv) : 0.0f;
        l2[g][i] = live2 ? __ldcg(pv + 1) : 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_DL; k += 2) {
          const float2 v =
              live2 ? __ldcg(reinterpret_cast<const float2*>(pv + 4 + lane * ATT_DL + k)) : make_float2(0.0f, 0.0f);
          a2[g][i][k] = v.x;
          a2[g][i][k + 1] = v.y;
        }
      }
    }
  }
  __device__ __forceinline__ void load_gate(int h0, const float* gate, int gate_stride) {
#pragma unroll
    for (int g = 0; g < kGH; ++g) {
#pragma unroll
      for (int i = 0; i < ATT_MERGE_GATE; ++i) {
        const int d = threadIdx.x + i * ATT_CW * 32;
#ifdef ATT_GATE_HEAD
        gv[g][i] = gate != nullptr ? gate[(i64)(h0 + g) * gate_stride] : 0.0f;  // one gate a head (Step 3.5)
#else
        gv[g][i] = gate != nullptr && d < ATT_D ? gate[(i64)(h0 + g) * gate_stride + d] : 0.0f;
#endif
      }
    }
  }
};

// o[h] = sum over the live ranges (0 .. live - 1, live_ranges) of acc * 2^(m - M) / sum of
// l * 2^(m - M) for the query heads h0 .. h0 + kGH - 1, by one block of ATT_CW warps: the heads' maxima first (threads
// striding the ranges), then warp w takes ranges w, w + ATT_CW, ... of every head at once (a range's m, l and acc
// loaded together, unconditionally, so several ranges are in flight), then one merge across the warps in warp order.
// With a gate (not null): o[h, d] *= sigmoid(gate[h * gate_stride + d]), or with ATT_GATE_HEAD one gate a head
// sigmoid(gate[h * gate_stride]) (attention_gated's output gate, as sigmoid then mul compute it). Partials are read
// through L2 (__ldcg): in the split's last block (ATT_MERGE) they are other blocks' writes. `first` (kEarly): the
// first ranges and the gate, loaded before `live` was known (MergeFirstLoads).
template <int kGH, bool kEarly = false>
__device__ __forceinline__ void merge_ranges(const float* part, int h0, float* o, const float* gate, int gate_stride,
                                             int live, const MergeFirstLoads<kGH>* first = nullptr) {
  static_assert(kGH <= ATT_GH, "att_sacc holds ATT_GH heads a warp");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __shared__ float s_max[ATT_CW][kGH], s_l[ATT_CW][kGH];
  float(*s_out)[ATT_GH][ATT_D] = att_sacc();
  float M[kGH];
#pragma unroll
  for (int g = 0; g < kGH; ++g) {
    const float* ph = part + (i64)(h0 + g) * ATT_SPLITS * ATT_PART;
    float mx = MEMRA_NEG_INF;
    int s = threadIdx.x;
    if (kEarly) {
      if (s < live && first->l1[g] > 0.0f) mx = fmaxf(mx, first->m1[g]);
      s += ATT_CW * 32;
    }
    for (; s < live; s += ATT_CW * 32)
      if (__ldcg(ph + s * ATT_PART + 1) > 0.0f) mx = fmaxf(mx, __ldcg(ph + s * ATT_PART));
    mx = warp_max(mx);
    if (lane == 0) s_max[warp][g] = mx;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < kGH; ++g) {
    M[g] = s_max[0][g];
    for (int w = 1; w < ATT_CW; ++w) M[g] = fmaxf(M[g], s_max[w][g]);
  }
  float L[kGH], out[kGH][ATT_DL];
#pragma unroll
  for (int g = 0; g < kGH; ++g) {
    L[g] = 0.0f;
#pragma unroll
    for (int k = 0; k < ATT_DL; ++k) out[g][k] = 0.0f;
  }
  int s0 = warp;
  if (kEarly) {
#pragma unroll
    for (int i = 0; i < ATT_MERGE_PRE; ++i) {
      if (warp + i * ATT_CW >= live) break;
#pragma unroll
      for (int g = 0; g < kGH; ++g) {
        if (first->l2[g][i] == 0.0f) continue;  // a range without keys
        const float c = exp2f(first->m2[g][i] - M[g]);
        L[g] += first->l2[g][i] * c;
#pragma unroll
        for (int k = 0; k < ATT_DL; ++k) out[g][k] += first->a2[g][i][k] * c;
      }
    }
    s0 += ATT_MERGE_PRE * ATT_CW;
  }
#pragma unroll 2
  for (int s = s0; s < live; s += ATT_CW) {
#pragma unroll
    for (int g = 0; g < kGH; ++g) {
      const float* pv = part + ((i64)(h0 + g) * ATT_SPLITS + s) * ATT_PART;
      const float m = __ldcg(pv), l = __ldcg(pv + 1);
      float a[ATT_DL];
#pragma unroll
      for (int k = 0; k < ATT_DL; k += 2) {
        const float2 v = __ldcg(reinterpret_cast<const float2*>(pv + 4 + lane * ATT_DL + k));
        a[k] = v.x;
        a[k + 1] = v.y;
      }
      if (l == 0.0f) continue;  // a range without keys
      const float c = exp2f(m - M[g]);
      L[g] += l * c;
#pragma unroll
      for (int k = 0; k < ATT_DL; ++k) out[g][k] += a[k] * c;
    }
  }
#pragma unroll
  for (int g = 0; g < kGH; ++g) {
    if (lane == 0) s_l[warp][g] = L[g];
#pragma unroll
    for (int k = 0; k < ATT_DL; ++k) s_out[warp][g][lane * ATT_DL + k] = out[g][k];
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < kGH; ++g) {
    const int h = h0 + g;
    float total = 0.0f;
    for (int w = 0; w < ATT_CW; ++w) total += s_l[w][g];
    const float inv = 1.0f / total;
#pragma unroll
    for (int i = 0; i < ATT_MERGE_GATE; ++i) {
      const int d = threadIdx.x + i * ATT_CW * 32;
      if (d >= ATT_D) break;
      float v = 0.0f;
      for (int w = 0; w < ATT_CW; ++w) v += s_out[w][g][d];
      v *= inv;
      if (gate != nullptr) {
        float gd;
        if (kEarly) {
          gd = first->gv[g][i];
        } else {
#ifdef ATT_GATE_HEAD
          gd = gate[(i64)h * gate_stride];  // one gate a head (Step 3.5)
#else
          gd = gate[(i64)h * gate_stride + d];
#endif
        }
        v *= sigmoidf_(gd);
      }
      o[(i64)h * ATT_D + d] = v;
#ifdef MEMRA_Q8X_OFF
      q8x_store(o, (i64)h * ATT_D + d, v);  // a warp's d: one 32-aligned group (ATT_D % 64 == 0)
#endif
    }
  }
}

// attention_combine: one block a query head.
__device__ __forceinline__ void attention_combine_body(const AttentionCombineParams& p) {
#if ATT_MERGE_EARLY
  MergeFirstLoads<1> first;
  first.load_gate(blockIdx.x, p.gate, p.gate_stride);
  const int live = live_ranges(p.pos[0], p.window);
  first.load_ranges(p.part, blockIdx.x, live);
  merge_ranges<1, true>(p.part, blockIdx.x, p.o, p.gate, p.gate_stride, live, &first);
#else
  merge_ranges<1>(p.part, blockIdx.x, p.o, p.gate, p.gate_stride, live_ranges(p.pos[0], p.window));
#endif
}

#ifdef ATT_MERGE
// Split-KV decode in one launch: after a block has written its range's partials it takes an
// arrival ticket of its head chunk (after a fence; a block without keys arrives too, having
// written nothing); the chunk's last block to arrive merges the chunk's live ranges into o
// (merge_ranges, `live` from live_ranges) and zeroes the ticket for the next launch (the
// tickets are zero between launches: kernels/cuda/GpuOp.h ticket_words). No separate
// attention_combine launch.
__device__ __forceinline__ void merge_if_last(const float* part, int hg, float* o, const float* gate, int gate_stride,
                                              unsigned* tickets, int live) {
  __shared__ unsigned s_arrived;
  __threadfence();  // this thread's partials before the block's arrival
  __syncthreads();
  if (threadIdx.x == 0) s_arrived = atomicAdd(tickets + hg, 1u);
  __syncthreads();
  if (s_arrived != ATT_SPLITS - 1) return;
  __threadfence();  // the other blocks' partials after their arrivals
  if (threadIdx.x == 0) tickets[hg] = 0u;
  merge_ranges<ATT_GH>(part, hg * ATT_GH, o, gate, gate_stride, live);
}
#endif

#ifdef ATT_STEP
// gated_attention_step (one token; ir/Ops.def): attention_split's blocks with the layer's
// prologue folded in, so the decode step's q_gate_split, qk_norm_rope (q and k) and kv_append
// launches disappear. Each block RMS-normalizes and rotates its own query heads straight from the
// projection qg (the q half of each head's [q | gate] row) into shared memory; the block whose
// range holds the new key (the last one) normalizes and rotates that key too, rounds the key and
// value to the caches' storage types, uses them from shared memory for its last key, and (the
// first head chunk of the kv head) writes them into the caches. No block reads the new row from
// the caches, so there is no ordering between blocks. The merge (attention_combine, or with
// ATT_MERGE each head chunk's last block) applies the gate, read from qg (the gate half of each
// head's row).
#ifndef ATT_NROT
#define ATT_NROT ATT_D
#endif
// ATT_STEP_EARLY (select-kernels{step-early-loads}): each warp loads the rows of its query heads
// right after the dependency wait, beside pos (their addresses do not depend on it), instead of
// after pos has said whether the block's range holds keys: one dependent round trip fewer before
// the cache rows. Blocks without keys load them too (from the L2; the projection wrote them). The
// same sums.
#ifndef ATT_STEP_EARLY
#define ATT_STEP_EARLY 0
#endif
#define ATT_QROWS ((ATT_GH + ATT_WARPS - 1) / ATT_WARPS)  // query heads a warp normalizes

// One head row of ATT_D: rms_norm (weight w) then NeoX rope at position P, as qk_norm_rope_rows
// and rope_neox compute them (the same sums; theta_i formed by repeated products), by one warp
// from global `src` into shared `dst`.
// norm_rope_values: the same from the row's values held (v[k]: element lane + 32 k, warp_row_load).
__device__ __forceinline__ void norm_rope_values(float (&v)[ATT_D / 32], const float* w, float* dst, float P, float eps,
                                                 float theta_scale, int lane) {
  constexpr int kPer = ATT_D / 32, kHalf = ATT_NROT / 2;
  const float s = warp_row_rms_scale_of(v, eps);
#pragma unroll
  for (int k = 0; k < kPer; ++k) dst[lane + 32 * k] = (v[k] * s) * w[lane + 32 * k];
  __syncwarp();
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int d = lane + 32 * k;
    float y = dst[d];
    if (d < ATT_NROT) {
      const int i = d < kHalf ? d : d - kHalf;
      const float theta = rope_theta(P, i, theta_scale);
      const float c = cosf(theta), sn = sinf(theta);
      const float x0 = dst[i], x1 = dst[i + kHalf];
      y = d < kHalf ? x0 * c - x1 * sn : x0 * sn + x1 * c;
    }
    v[k] = y;
  }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < kPer; ++k) dst[lane + 32 * k] = v[k];
}
__device__ __forceinline__ void norm_rope_row(const float* src, const float* w, float* dst, float P, float eps,
                                              float theta_scale, int lane) {
  float v[ATT_D / 32];
  warp_row_load(src, v);
  norm_rope_values(v, w, dst, P, eps, theta_scale, lane);
}

// The new key's row as add_keys reads it (ATT_DL floats of a lane from shared memory).
struct SharedRow {
  const float* r;
  __device__ __forceinline__ float get(int k) const { return r[k]; }
};

__device__ __forceinline__ void attention_step_split_body(const AttentionStepParams& p) {
  __shared__ float s_qw[ATT_D], s_kw[ATT_D];
  for (int d = threadIdx.x; d < ATT_D; d += ATT_WARPS * 32) {  // weights: before the dependency wait
    s_qw[d] = p.q_w[d];
    s_kw[d] = p.k_w[d];
  }
  memra_grid_dependency();
  const int split = blockIdx.x % ATT_SPLITS, hg = blockIdx.x / ATT_SPLITS;  // hg: (kv head, head chunk)
  const int h0 = hg * ATT_GH, kvh = h0 / ATT_GROUP;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#if ATT_STEP_EARLY
  float q_rows[ATT_QROWS][ATT_D / 32];  // query heads warp, warp + ATT_WARPS, ...: loaded beside pos
#pragma unroll
  for (int i = 0; i < ATT_QROWS; ++i)
    if (warp + i * ATT_WARPS < ATT_GH) warp_row_load(p.qg + (i64)(h0 + warp + i * ATT_WARPS) * 2 * ATT_D, q_rows[i]);
#endif
  const int P = p.pos[0];
  const KeyRange r = split_range(P, p.window, split);
  if (r.lo >= r.hi) {  // no key here (a short context): the merge does not read this range
#ifdef ATT_MERGE
    merge_if_last(p.part, hg, p.o, p.qg + ATT_D, 2 * ATT_D, p.tickets, live_ranges(P, p.window));
#endif
    return;
  }
  const bool last = r.hi == P + 1;  // this range ends with the new key
  __shared__ __align__(16) float s_q[ATT_GH][ATT_D];
  __shared__ __align__(16) float s_k[ATT_D], s_v[ATT_D];
  __syncthreads();  // s_qw, s_kw
#if ATT_STEP_EARLY
#pragma unroll
  for (int i = 0; i < ATT_QROWS; ++i)
    if (warp + i * ATT_WARPS < ATT_GH)
      norm_rope_values(q_rows[i], s_qw, s_q[warp + i * ATT_WARPS], (float)P, p.eps, p.theta_scale, lane);
#else
  for (int g = warp; g < ATT_GH; g += ATT_WARPS)
    norm_rope_row(p.qg + (i64)(h0 + g) * 2 * ATT_D, s_qw, s_q[g], (float)P, p.eps, p.theta_scale, lane);
#endif
  if (last && warp == ATT_WARPS - 1) {
    norm_rope_row(p.k + (i64)kvh * ATT_D, s_kw, s_k, (float)P, p.eps, p.theta_scale, lane);
    __syncwarp();
    // The first head chunk of the kv head appends the row (kv_append's rounding); every last
    // block uses the rounded values it would read back.
    const bool append = hg % (ATT_GROUP / ATT_GH) == 0;
    const i64 row = (att_row(P) * ATT_HKV + kvh) * ATT_D;
    // The warp's lanes hold one 32-element block of the row an iteration (q8_0's quantization).
    for (int d = lane; d < ATT_D; d += 32) {
      const float kv = s_k[d], vv = p.v[(i64)kvh * ATT_D + d];
      s_k[d] = kv_store_warp<ATT_KT>(p.k_cache, row + d, kv, append);
      s_v[d] = kv_store_warp<ATT_VT>(p.v_cache, row + d, vv, append);
    }
  }
  __syncthreads();
  SplitSoftmax st;
  st.init(&s_q[0][0], p.scale * ATT_LOG2E, lane);
  st.add_cache_keys(p.k_cache, p.v_cache, kvh, r.lo, last ? r.hi - 1 : r.hi, warp, lane);
  if (last && warp == 0) {
    const SharedRow kr{s_k + lane * ATT_DL}, vr{s_v + lane * ATT_DL};
    st.add_keys<1>(&kr, &vr, 1);
  }
  st.write_partials(p.part, h0, split, warp, lane);
#ifdef ATT_MERGE
  merge_if_last(p.part, hg, p.o, p.qg + ATT_D, 2 * ATT_D, p.tickets,
                live_ranges(P, p.window));  // the gate: each head's row [q | gate]
#endif
}
#endif  // ATT_STEP
#endif  // ATT_SPLITS

// Prefill with GQA grouping: one block of ATT_WARPS warps per (token, kv head) computes all
// ATT_HQ / ATT_HKV query heads that share that kv head, so each key / value row is read from L2
// once per group instead of once per query head (the per-(token, head) kernel above reads it
// ATT_HQ / ATT_HKV times). Warps stride the keys; each keeps an online softmax per head; the warps'
// partials merge at the end, one head per warp.
// Its static shared memory (m, l and acc per warp and head). A module whose geometry exceeds the
// 48 KiB static limit (the split-KV decode modules use 8 warps) leaves the entry out; the unit
// selects it only where it fits (Attention.cc).
#define ATT_GROUP_SMEM (ATT_WARPS * ATT_GROUP * (2 + ATT_PER_LANE * 32) * 4)
#if ATT_GROUP_SMEM <= 49152

__device__ __forceinline__ void attention_group_body(const float* q, const void* k_cache, const void* v_cache,
                                                     const int* pos, float* o, int n_tok, float scale, int window) {
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
  const int n_keys = pos[t] + 1, first = window > 0 ? max(0, n_keys - window) : 0;
  for (int j = first + warp; j < n_keys; j += ATT_WARPS) {
    const i64 row = (att_row(j) * ATT_HKV + kvh) * ATT_D;
    float kv[ATT_PER_LANE], vv[ATT_PER_LANE];
#pragma unroll
    for (int k = 0; k < ATT_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      kv[k] = d < ATT_D ? load_as_f32<ATT_KT>(k_cache, row + d) : 0.0f;
      vv[k] = d < ATT_D ? load_as_f32<ATT_VT>(v_cache, row + d) : 0.0f;
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
  attention_body(p.q, p.k_cache, p.v_cache, p.pos, p.o, p.n_tok, p.scale, p.window);
}
#ifdef ATT_SPLITS
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_split(const AttentionParams p) {
  memra_grid_dependency();
  attention_split_body(p.q, p.k_cache, p.v_cache, p.pos, p.part, p.scale, p.window);
#ifdef ATT_MERGE
  merge_if_last(p.part, blockIdx.x / ATT_SPLITS, p.o, p.gate, p.gate_stride, p.tickets,
                live_ranges(p.pos[0], p.window));
#endif
}
extern "C" __global__ void __launch_bounds__(ATT_CW * 32) attention_combine(const AttentionCombineParams p) {
  memra_grid_dependency();
  attention_combine_body(p);
}
#ifdef ATT_STEP
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_step_split(const AttentionStepParams p) {
  attention_step_split_body(p);  // its weight loads come before the dependency wait
}
#endif
#endif
#if ATT_GROUP_SMEM <= 49152
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_group(const AttentionParams p) {
  memra_grid_dependency();
  attention_group_body(p.q, p.k_cache, p.v_cache, p.pos, p.o, p.n_tok, p.scale, p.window);
}
#endif
