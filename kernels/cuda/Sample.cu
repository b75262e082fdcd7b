// The device sampler (the `sample` op): one block per row, the CPU's SampleRow
// (kernels/cpu/Sampling.cc) decided with the same arithmetic (SampleMath.cuh). Weights are
// integers, so every sum is exact and the pick does not depend on the order threads add in.
//
// The order-dependent filters (top-k: the first k by logit; top-p: the shortest prefix reaching
// a weight) find their boundary element by a radix select over the logits' order keys: four
// passes of 256-bin histograms (counts or weights) narrow the key down a byte at a time, then one
// pass in id order resolves ties. The draw is one pass in id order: per-thread chunk sums, a
// block scan, and the thread whose chunk holds the target walks it.
//
// Defines: SMP_V (vocabulary, the row length), SMP_P (penalty entries per row).
#include "Common.cuh"
#include "SampleMath.cuh"
#include "SampleParams.h"

#ifndef SMP_V
#define SMP_V 1024
#endif
#ifndef SMP_P
#define SMP_P 4
#endif
#define SMP_BLOCK 1024
#define SMP_WARPS (SMP_BLOCK / 32)
#define SMP_CHUNK ((SMP_V + SMP_BLOCK - 1) / SMP_BLOCK)

typedef unsigned long long u64;

struct SmpShared {
  unsigned bits[(SMP_V + 31) / 32];  // ids with a penalized logit
  int pid[SMP_P];                    // penalized ids (-1: none, or merged into an earlier entry)
  float pval[SMP_P];
  unsigned cnt[256];
  u64 wsum[256];
  u64 red[SMP_WARPS];
  unsigned redk[SMP_WARPS];
  int redi[SMP_WARPS], redj[SMP_WARPS];
  float redv[SMP_WARPS];
  u64 b_need;
  unsigned b_digit;
  int b_id;
};

// Raw logit v of id i, penalized.
__device__ __forceinline__ float smp_pen(const SmpShared& sh, int i, float v) {
  if (sh.bits[i >> 5] & (1u << (i & 31))) {
    for (int j = 0; j < SMP_P; ++j)
      if (sh.pid[j] == i) return sh.pval[j];
  }
  return v;
}
__device__ __forceinline__ float smp_load(const SmpShared& sh, const float* x, int i) { return smp_pen(sh, i, x[i]); }

// f(i, raw, ok) for every id of the row: four ids per 16-byte load, four loads in flight per
// thread (one row from one block is latency-bound otherwise: a scalar loop took ~150 us). Every lane
// of a warp makes the same calls, ok false past the row, so f may use warp-wide intrinsics.
#define SMP_V4 (SMP_V % 4 == 0 ? SMP_V / 4 : 0)
template <class F>
__device__ __forceinline__ void smp_for_each(const float* x, F f) {
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (int base = 0; base < SMP_V4; base += SMP_BLOCK * 4) {
    float4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = base + u * SMP_BLOCK + threadIdx.x;
      v[u] = j < SMP_V4 ? __ldg(x4 + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = base + u * SMP_BLOCK + threadIdx.x;
      const bool ok = j < SMP_V4;
      f(4 * j, v[u].x, ok);
      f(4 * j + 1, v[u].y, ok);
      f(4 * j + 2, v[u].z, ok);
      f(4 * j + 3, v[u].w, ok);
    }
  }
  for (int base = SMP_V4 * 4; base < SMP_V; base += SMP_BLOCK) {
    const int i = base + threadIdx.x;
    const bool ok = i < SMP_V;
    f(i, ok ? x[i] : 0.0f, ok);
  }
}

__device__ __forceinline__ u64 smp_block_sum(SmpShared& sh, u64 v) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) sh.red[w] = v;
  __syncthreads();
  u64 t = 0;
  for (int j = 0; j < SMP_WARPS; ++j) t += sh.red[j];
  __syncthreads();
  return t;
}

// Exclusive prefix of v over the block's threads in thread order.
__device__ __forceinline__ u64 smp_block_exclusive(SmpShared& sh, u64 v) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  u64 inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 t = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += t;
  }
  if (lane == 31) sh.red[w] = inc;
  __syncthreads();
  u64 before = 0;
  for (int j = 0; j < w; ++j) before += sh.red[j];
  __syncthreads();
  return before + inc - v;
}

// The weight of logit v in the filters (untempered) or the draw (tempered); count mode: 1.
template <int kMode>  // 0 count, 1 untempered weight, 2 tempered weight
__device__ __forceinline__ u64 smp_mass(float v, float m, float temp) {
  if (kMode == 0) return 1ull;
  const float x = smp_sub(v, m);
  return kMode == 1 ? smp_weight(x) : smp_weight(smp_div(x, temp));
}

// In the prefix of the order that ends at (bkey, bid), and at or above min_logit.
__device__ __forceinline__ bool smp_in(unsigned key, int i, float v, unsigned bkey, int bid, float min_logit) {
  return (key > bkey || (key == bkey && i <= bid)) && v >= min_logit;
}

// The first id, in id order among the elements in (bkey, bid, min_logit) whose key matches
// (key & kmask) == kval, at which the running mass reaches `need` (>= 1). -1 if none does.
template <int kMode>
__device__ int smp_scan_pick(SmpShared& sh, const float* x, float m, float temp, unsigned bkey, int bid,
                             float min_logit, unsigned kmask, unsigned kval, u64 need) {
  const int lo = threadIdx.x * SMP_CHUNK;
  const int hi = min(SMP_V, lo + SMP_CHUNK);
  u64 own = 0;
#pragma unroll 8
  for (int i = lo; i < hi; ++i) {
    const float v = smp_load(sh, x, i);
    const unsigned key = smp_key(v);
    if ((key & kmask) == kval && smp_in(key, i, v, bkey, bid, min_logit)) own += smp_mass<kMode>(v, m, temp);
  }
  if (threadIdx.x == 0) sh.b_id = -1;
  const u64 before = smp_block_exclusive(sh, own);  // (its barriers order b_id's reset)
  if (before < need && need <= before + own) {
    u64 run = before;
    for (int i = lo; i < hi; ++i) {
      const float v = smp_load(sh, x, i);
      const unsigned key = smp_key(v);
      if ((key & kmask) == kval && smp_in(key, i, v, bkey, bid, min_logit)) {
        run += smp_mass<kMode>(v, m, temp);
        if (run >= need) {
          sh.b_id = i;
          break;
        }
      }
    }
  }
  __syncthreads();
  const int r = sh.b_id;
  __syncthreads();
  return r;
}

// The element of the order (key descending, id ascending) at which the running mass over the
// elements in (bkey, bid) first reaches `need` (>= 1, at most their total): its key and id.
template <int kMode>
__device__ void smp_select(SmpShared& sh, const float* x, float m, unsigned bkey, int bid, u64 need, unsigned* out_key,
                           int* out_id) {
  const int lane = threadIdx.x & 31;
  unsigned prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int j = threadIdx.x; j < 256; j += SMP_BLOCK) {
      sh.cnt[j] = 0;
      sh.wsum[j] = 0;
    }
    __syncthreads();
    smp_for_each(x, [&](int i, float raw, bool ok) {
      int bin = -1;
      u64 w = 0;
      if (ok) {
        const float v = smp_pen(sh, i, raw);
        const unsigned key = smp_key(v);
        if ((key & mask) == prefix && smp_in(key, i, v, bkey, bid, -3.40282347e+38f)) {
          w = smp_mass<kMode>(v, m, 1.0f);
          if (w != 0) bin = static_cast<int>((key >> shift) & 255u);
        }
      }
      // Lanes of one bin add once (flat rows put most of a warp in one bin).
      if (!__any_sync(0xffffffffu, bin >= 0)) return;
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (kMode == 0) {
        if (bin >= 0 && lane == __ffs(peers) - 1) atomicAdd(&sh.cnt[bin], static_cast<unsigned>(__popc(peers)));
      } else if (__all_sync(0xffffffffu, peers == 0xffffffffu)) {
        u64 t = w;
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
        if (bin >= 0 && lane == 0) atomicAdd(&sh.wsum[bin], t);
      } else if (bin >= 0) {
        atomicAdd(&sh.wsum[bin], w);
      }
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      u64 above = 0;
      int b = 255;
      for (; b > 0; --b) {
        const u64 h = kMode == 0 ? static_cast<u64>(sh.cnt[b]) : sh.wsum[b];
        if (above + h >= need) break;
        above += h;
      }
      sh.b_need = need - above;
      sh.b_digit = static_cast<unsigned>(b);
    }
    __syncthreads();
    need = sh.b_need;
    prefix |= sh.b_digit << shift;
    mask |= 255u << shift;
  }
  *out_key = prefix;
  *out_id = smp_scan_pick<kMode>(sh, x, m, 1.0f, bkey, bid, -3.40282347e+38f, 0xffffffffu, prefix, need);
}

extern "C" __global__ void __launch_bounds__(SMP_BLOCK) sample_rows(const SampleParams p) {
  __shared__ SmpShared sh;
  memra_grid_dependency();
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  for (long long row = blockIdx.x; row < p.n_rows; row += gridDim.x) {
    const float* x = p.logits + row * SMP_V;
    const float* prm = p.params + row * SMP_PARAMS;
    const int* pen = p.penalties + row * 2 * SMP_P;
    for (int j = threadIdx.x; j < (SMP_V + 31) / 32; j += SMP_BLOCK) sh.bits[j] = 0;
    __syncthreads();
    // The penalties in order, a repeated id compounding on its first entry (the CPU applies them
    // one after another to the row).
    if (threadIdx.x == 0) {
      for (int j = 0; j < SMP_P; ++j) {
        sh.pid[j] = -1;
        const int id = pen[j];
        if (id < 0 || id >= SMP_V) continue;
        int first = -1;
        for (int k = 0; k < j; ++k)
          if (sh.pid[k] == id) first = k;
        const float base = first >= 0 ? sh.pval[first] : x[id];
        const float v = smp_penalize(base, pen[SMP_P + j], prm[SMP_REPEAT], prm[SMP_FREQUENCY], prm[SMP_PRESENCE]);
        if (first >= 0) {
          sh.pval[first] = v;
        } else {
          sh.pid[j] = id;
          sh.pval[j] = v;
          sh.bits[id >> 5] |= 1u << (id & 31);
        }
      }
    }
    __syncthreads();

    // Non-finite raw logits, the greedy pick (float order, lowest id), the top of the key order.
    bool bad = false;
    float gv = 0.0f;
    int gi = 0x7fffffff;
    unsigned mk = 0;
    int mi = 0x7fffffff;
    smp_for_each(x, [&](int i, float raw, bool ok) {
      if (!ok) return;
      bad |= (__float_as_uint(raw) & 0x7f800000u) == 0x7f800000u;
      const float v = smp_pen(sh, i, raw);
      // Ids arrive in no fixed order within a thread: ties go to the lower id explicitly.
      if (gi == 0x7fffffff || v > gv || (v == gv && i < gi)) {
        gv = v;
        gi = i;
      }
      const unsigned k = smp_key(v);
      if (k > mk || (k == mk && i < mi)) {
        mk = k;
        mi = i;
      }
    });
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, gv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, gi, o);
      if (oi != 0x7fffffff && (gi == 0x7fffffff || ov > gv || (ov == gv && oi < gi))) {
        gv = ov;
        gi = oi;
      }
      const unsigned ok = __shfl_xor_sync(0xffffffffu, mk, o);
      const int oj = __shfl_xor_sync(0xffffffffu, mi, o);
      if (ok > mk || (ok == mk && oj < mi)) {
        mk = ok;
        mi = oj;
      }
    }
    bad = __syncthreads_or(bad);
    if (lane == 0) {
      sh.redv[w] = gv;
      sh.redi[w] = gi;
      sh.redk[w] = mk;
      sh.redj[w] = mi;
    }
    __syncthreads();
    gv = sh.redv[0];
    gi = sh.redi[0];
    mk = sh.redk[0];
    mi = sh.redj[0];
    for (int j = 1; j < SMP_WARPS; ++j) {
      if (sh.redi[j] != 0x7fffffff && (gi == 0x7fffffff || sh.redv[j] > gv || (sh.redv[j] == gv && sh.redi[j] < gi))) {
        gv = sh.redv[j];
        gi = sh.redi[j];
      }
      if (sh.redk[j] > mk || (sh.redk[j] == mk && sh.redj[j] < mi)) {
        mk = sh.redk[j];
        mi = sh.redj[j];
      }
    }
    __syncthreads();
    const float temp = prm[SMP_TEMPERATURE];
    if (bad || !(temp > 0.0f)) {
      if (threadIdx.x == 0) p.ids[row] = bad ? -1 : gi;
      continue;
    }
    const float m = smp_key_value(mk);

    // top-k: the boundary is the k-th element of the order.
    unsigned bkey = 0;  // every finite key is above 0: all in
    int bid = 0x7fffffff;
    const float top_k = prm[SMP_TOP_K];
    if (top_k >= 1.0f && top_k < static_cast<float>(SMP_V))
      smp_select<0>(sh, x, m, 0u, 0x7fffffff, static_cast<u64>(top_k), &bkey, &bid);
    // top-p: the shortest prefix whose untempered weight reaches top_p of the top-k's.
    const float top_p = prm[SMP_TOP_P];
    if (top_p < 1.0f) {
      u64 z = 0;
      smp_for_each(x, [&](int i, float raw, bool ok) {
        if (!ok) return;
        const float v = smp_pen(sh, i, raw);
        if (smp_in(smp_key(v), i, v, bkey, bid, -3.40282347e+38f)) z += smp_mass<1>(v, m, 1.0f);
      });
      z = smp_block_sum(sh, z);
      const u64 target =
          top_p > 0.0f ? static_cast<u64>(smp_dmul(static_cast<double>(top_p), static_cast<double>(z))) : 0ull;
      if (target == 0) {
        bkey = mk;
        bid = mi;
      } else {
        smp_select<1>(sh, x, m, bkey, bid, target, &bkey, &bid);
      }
    }
    // The draw over what is left (and min-p), in id order.
    const float min_logit = smp_add(m, prm[SMP_MIN_P_LOGIT]);
    u64 z = 0;
    smp_for_each(x, [&](int i, float raw, bool ok) {
      if (!ok) return;
      const float v = smp_pen(sh, i, raw);
      if (smp_in(smp_key(v), i, v, bkey, bid, min_logit)) z += smp_mass<2>(v, m, temp);
    });
    z = smp_block_sum(sh, z);
    if (z == 0) {
      if (threadIdx.x == 0) p.ids[row] = mi;
      continue;
    }
    const float u = prm[SMP_U];
    u64 target = u > 0.0f ? static_cast<u64>(smp_dmul(static_cast<double>(u), static_cast<double>(z))) : 0ull;
    if (target > z - 1) target = z - 1;
    const int pick = smp_scan_pick<2>(sh, x, m, temp, bkey, bid, min_logit, 0u, 0u, target + 1);
    if (threadIdx.x == 0) p.ids[row] = pick;
  }
}
