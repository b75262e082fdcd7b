// The ops of a step over several sequences (ir/Ops.def, "sequences"): per-row positions and
// slots from the batch description, the position counters' advance, the paged KV append, paged
// attention (split-KV for every row) and the last row of each entry. Rows of no entry (tok_seq
// < 0, slot < 0) touch no state; a row whose KV block is missing is skipped (the host gives every
// row a block before the step, runtime/BatchedSlots.cc).
#include "Common.cuh"
#include "SequencesParams.h"

// pos[t] = counter[s] + t - seq_start[b], slot[t] = s for b = tok_seq[t], s = seq_slot[b]; -1, -1
// on padding rows.
extern "C" __global__ void seq_positions(const SeqPositionsParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(t, (i64)p.n_tok) {
    const int b = p.tok_seq[t];
    const int s = b >= 0 && b < p.n_seq ? p.seq_slot[b] : -1;
    p.pos[t] = s >= 0 ? p.counter[s] + (int)t - p.seq_start[b] : -1;
    p.slot[t] = s;
  }
}

// counter[seq_slot[b]] += the entry's rows.
extern "C" __global__ void seq_advance_positions(const SeqPositionsParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(b, (i64)p.n_seq) {
    const int s = p.seq_slot[b];
    if (s >= 0) p.counter[s] += p.seq_start[b + 1] - p.seq_start[b];
  }
}

extern "C" __global__ void take_seq_last_rows(const TakeSeqLastRowsParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, (i64)p.n_seq * p.row) {
    const i64 b = i / p.row, c = i % p.row;
    const int last = p.seq_start[b + 1] - 1;
    p.y[i] = p.seq_start[b + 1] > p.seq_start[b] && last >= 0 && last < p.n_tok ? p.x[(i64)last * p.row + c] : 0.0f;
  }
}

// The block row of position `j` of slot `s`, or -1.
__device__ __forceinline__ i64 paged_row(const int* blocks, int max_blocks, int n_blocks, int block, int s, int j) {
  const int jb = j / block;
  if (jb >= max_blocks) return -1;
  const int blk = blocks[(i64)s * max_blocks + jb];
  if (blk < 0 || blk >= n_blocks) return -1;
  return (i64)blk * block + j % block;
}

#ifdef PG_WIDTH
extern "C" __global__ void paged_kv_append(const PagedKvAppendParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, (i64)p.n_tok * PG_WIDTH) {
    const i64 t = i / PG_WIDTH, c = i % PG_WIDTH;
    const int s = p.slot[t];
    if (s < 0) continue;
    const i64 row = paged_row(p.blocks, p.max_blocks, p.n_blocks, PG_BS, s, p.pos[t]);
    if (row < 0) continue;
    // q8_0 caches: a warp's 32 elements are one block of one row (PG_WIDTH a multiple of 32), and
    // s and row are the same for all of them, so whole warps store together.
    kv_store_warp<PG_KT>(p.k_cache, row * PG_WIDTH + c, p.k[i]);
    kv_store_warp<PG_VT>(p.v_cache, row * PG_WIDTH + c, p.v[i]);
  }
}
#endif

#ifdef PA_D
// Split-KV attention for every row: row t's keys 0..pos[t] are cut into ranges of PA_SPLIT_LEN
// (fixed per module, a multiple of the block size, so a row's split structure depends on its own
// length only: batch-invariant), one block of PA_WARPS warps per (row, head, range) writes its
// partial (m, l, unnormalized acc[D]); paged_attention_combine merges a row's ranges in order.
// Ranges past a row's length and rows of no slot write l = 0.
#define PA_PER_LANE ((PA_D + 31) / 32)
#define PA_PART (PA_D + 2)

extern "C" __global__ void __launch_bounds__(PA_WARPS * 32) paged_attention_split(const PagedAttentionParams p) {
  memra_grid_dependency();
  const int split = blockIdx.x % PA_SPLITS, h = (blockIdx.x / PA_SPLITS) % PA_HQ;
  const int t = blockIdx.x / (PA_SPLITS * PA_HQ);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* pv = p.part + (i64)blockIdx.x * PA_PART;
  const int s = t < p.n_tok ? p.slot[t] : -1;
  const int n_keys = s >= 0 ? p.pos[t] + 1 : 0;
  // A sliding window drops the keys before its first: ranges wholly before it hold none.
  const int first = p.window > 0 ? max(0, n_keys - p.window) : 0;
  const int lo = max(split * PA_SPLIT_LEN, first), hi = min(split * PA_SPLIT_LEN + PA_SPLIT_LEN, n_keys);
  if (lo >= hi) {
    if (threadIdx.x == 0) pv[1] = 0.0f;
    return;
  }
  const int kvh = h / (PA_HQ / PA_HKV);
  const float* qv = p.q + ((i64)t * PA_HQ + h) * PA_D;
  float qr[PA_PER_LANE], acc[PA_PER_LANE];
#pragma unroll
  for (int k = 0; k < PA_PER_LANE; ++k) {
    const int d = lane + 32 * k;
    qr[k] = d < PA_D ? qv[d] * p.scale : 0.0f;
    acc[k] = 0.0f;
  }
  float m = MEMRA_NEG_INF, l = 0.0f;
  for (int j = lo + warp; j < hi; j += PA_WARPS) {
    const i64 row = paged_row(p.blocks, p.max_blocks, p.n_blocks, PA_BS, s, j);
    if (row < 0) continue;
    const i64 kv = (row * PA_HKV + kvh) * PA_D;
    float sc = 0.0f;
#pragma unroll
    for (int k = 0; k < PA_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < PA_D) sc += qr[k] * load_as_f32<PA_KT>(p.k_cache, kv + d);
    }
    sc = warp_sum(sc);
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new), e = expf(sc - m_new);
    l = l * corr + e;
#pragma unroll
    for (int k = 0; k < PA_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      acc[k] = acc[k] * corr + (d < PA_D ? e * load_as_f32<PA_VT>(p.v_cache, kv + d) : 0.0f);
    }
    m = m_new;
  }
  __shared__ float sm[PA_WARPS], sl[PA_WARPS];
  __shared__ float sacc[PA_WARPS][PA_PER_LANE * 32];
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
#pragma unroll
  for (int k = 0; k < PA_PER_LANE; ++k) sacc[warp][lane + 32 * k] = acc[k];
  __syncthreads();
  if (warp != 0) return;
  float M = MEMRA_NEG_INF;
  for (int w = 0; w < PA_WARPS; ++w)
    if (sl[w] > 0.0f) M = fmaxf(M, sm[w]);
  float L = 0.0f, out[PA_PER_LANE];
#pragma unroll
  for (int k = 0; k < PA_PER_LANE; ++k) out[k] = 0.0f;
  for (int w = 0; w < PA_WARPS; ++w) {
    if (sl[w] == 0.0f) continue;  // a warp that saw no key
    const float c = expf(sm[w] - M);
    L += sl[w] * c;
#pragma unroll
    for (int k = 0; k < PA_PER_LANE; ++k) out[k] += sacc[w][lane + 32 * k] * c;
  }
  if (lane == 0) {
    pv[0] = M;
    pv[1] = L;
  }
#pragma unroll
  for (int k = 0; k < PA_PER_LANE; ++k) {
    const int d = lane + 32 * k;
    if (d < PA_D) pv[2 + d] = out[k];
  }
}

// o[t, h] = sum over ranges of acc * e^(m - M) / sum of l * e^(m - M); one warp per (row, head).
extern "C" __global__ void __launch_bounds__(32) paged_attention_combine(const PagedAttentionParams p) {
  memra_grid_dependency();
  const int t = blockIdx.x / PA_HQ, h = blockIdx.x % PA_HQ, lane = threadIdx.x;
  float* ov = p.o + ((i64)t * PA_HQ + h) * PA_D;
  const float* ph = p.part + (i64)blockIdx.x * PA_SPLITS * PA_PART;
  float M = MEMRA_NEG_INF;
  for (int r = 0; r < PA_SPLITS; ++r)
    if (ph[r * PA_PART + 1] > 0.0f) M = fmaxf(M, ph[r * PA_PART]);
  float L = 0.0f, out[PA_PER_LANE];
#pragma unroll
  for (int k = 0; k < PA_PER_LANE; ++k) out[k] = 0.0f;
  for (int r = 0; r < PA_SPLITS; ++r) {
    const float l = ph[r * PA_PART + 1];
    if (l == 0.0f) continue;
    const float c = expf(ph[r * PA_PART] - M);
    L += l * c;
#pragma unroll
    for (int k = 0; k < PA_PER_LANE; ++k) {
      const int d = lane + 32 * k;
      if (d < PA_D) out[k] += ph[r * PA_PART + 2 + d] * c;
    }
  }
  // A row of no slot (or no key) has L = 0: zeros, as the op says.
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
#pragma unroll
  for (int k = 0; k < PA_PER_LANE; ++k) {
    const int d = lane + 32 * k;
    if (d < PA_D) ov[d] = out[k] * inv;
  }
}
#endif
