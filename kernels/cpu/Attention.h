// Gated full attention pieces: the q/gate split, the KV cache append, causal GQA attention.
//
// KV cache layout: one row per position, [capacity][n_head_kv * head_dim] for K and for V (K
// stored after RoPE, V raw), rows 0..len-1 valid. Elements are f32, or f16 / bf16, or q8_0 blocks
// (llama.cpp's -ctk / -ctv): rows are rounded to nearest-even (or quantized as ggml's
// quantize_row_q8_0) once, when appended, and widened to f32 when attention reads them, so the
// arithmetic after the read is the f32 cache's. A q8_0 cache's rows and heads are whole blocks.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/formats/GgmlType.h"

namespace memra::kernels::cpu {

// qg is the attn_q projection [T][n_head * 2 * head_dim], per head [q_h | gate_h]. Writes
// q [T][n_head * head_dim] and gate [T][n_head * head_dim] (no overlap with qg).
void QGateSplit(const float* qg, int64_t T, int64_t n_head, int64_t head_dim, float* q, float* gate);

// A KV cache (or pool) and its element type: kF32, kF16, kBF16 or kQ8_0.
// A plain float pointer converts to an f32 cache.
struct KvRows {
  void* data = nullptr;
  formats::GgmlType type = formats::GgmlType::kF32;
  KvRows() = default;
  KvRows(void* d, formats::GgmlType t) : data(d), type(t) {}
  KvRows(float* f32) : data(f32) {}  // NOLINT: an f32 cache
};
struct ConstKvRows {
  const void* data = nullptr;
  formats::GgmlType type = formats::GgmlType::kF32;
  ConstKvRows() = default;
  ConstKvRows(const void* d, formats::GgmlType t) : data(d), type(t) {}
  ConstKvRows(const float* f32) : data(f32) {}                  // NOLINT: an f32 cache
  ConstKvRows(const KvRows& r) : data(r.data), type(r.type) {}  // NOLINT: a writable cache reads too
};

// Stores `n` f32 values as elements first..first+n-1 of `cache` in its element type. Errors: a
// type the cache cannot hold.
absl::Status StoreKvElements(const float* src, int64_t n, KvRows cache, int64_t first);

// Copies rows [T][width] into cache rows P..P+T-1 of a [capacity][width] cache.
// Errors: P < 0 or P + T > capacity (context overflow).
// ring W > 0 (ir/Ops.def kv_append ring): the cache is a ring, position p in row p % capacity;
// errors: T > capacity - W + 1 (the call would overwrite keys its own queries still see).
absl::Status KvAppend(const float* rows, int64_t T, int64_t width, int64_t P, int64_t capacity, KvRows cache,
                      int64_t ring = 0);

// Causal grouped-query attention of T new tokens at positions P..P+T-1 over a cache already
// holding their keys/values: k_cache, v_cache are [>= P+T][n_head_kv * head_dim].
// For query head h (kv head h / (n_head / n_head_kv)) and token t:
//   s_j = scale · <q[t,h], k[j,kvh]>,  j = 0..P+t
//   p   = softmax(s) (f32, max-subtracted, sum accumulated in double)
//   out[t, h] = Σ_j p_j · v[j, kvh]
// q and out are [T][n_head * head_dim]. Threads split (token, head) pairs. n_head must be a
// multiple of n_head_kv. window W > 0: only keys j > P+t-W (a sliding window), with the same
// arithmetic over the keys it keeps. ring_rows > 0: the caches are rings of that many rows, key j
// in row j % ring_rows.
void CausalAttention(const float* q, int64_t T, int64_t P, ConstKvRows k_cache, ConstKvRows v_cache, int64_t n_head,
                     int64_t n_head_kv, int64_t head_dim, float scale, float* out, ThreadPool* pool = nullptr,
                     int64_t window = 0, int64_t ring_rows = 0);

// Paged attention of T rows of several sequences (ir/Ops.def paged_attention): row t with
// slot[t] >= 0 attends keys 0..pos[t] of its slot, key j at block blocks[slot * max_blocks + j /
// block] row j % block of the [n_blocks][block][n_head_kv * head_dim] caches, with exactly
// CausalAttention's arithmetic (so a row's result equals the one-sequence kernel's); rows with
// slot[t] < 0 get zeros; window as CausalAttention's. Errors: a key in the window without a
// block, a position past the table.
absl::Status PagedAttention(const float* q, int64_t T, const int32_t* pos, const int32_t* slot, const int32_t* blocks,
                            int64_t max_blocks, int64_t block, int64_t n_blocks, ConstKvRows k_cache,
                            ConstKvRows v_cache, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                            float* out, ThreadPool* pool = nullptr, int64_t window = 0);

}  // namespace memra::kernels::cpu
