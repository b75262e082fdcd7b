// Embedding lookup and matrix multiplication against GGUF weights of any decodable ggml type.
//
// Activations are f32, row-major, one row per token. Weight rows are decoded to f32 on the fly
// (formats::Dequantize, bit-exact with ggml) and every product is accumulated in f32.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"

namespace memra::kernels::cpu {

// out[t][:] = decoded row ids[t] of `table` (ne {n_embd, n_vocab}); out is [ids.size()][table.cols].
// Errors: an id outside [0, table.rows), an undecodable type.
absl::Status Embed(const WeightView& table, absl::Span<const int32_t> ids, float* out, ThreadPool* pool = nullptr);

// y[t][n] = Σ_k x[t][k] · W[n][k] for a weight W with ne {K, N} (w.cols = K, w.rows = N):
// x is [T][K], y is [T][N] (y must not alias x). Each weight row is decoded once and reused for
// all T tokens; threads split the output columns N. The dot product accumulates in f32 over 8
// interleaved partial sums (k mod 8) combined pairwise, so the result does not depend on the
// thread count. Errors: undecodable weight type.
absl::Status Matmul(const float* x, int64_t T, const WeightView& w, float* y, ThreadPool* pool = nullptr);

// The f32 dot product Matmul uses (8 interleaved partial sums, pairwise combined).
float Dot(const float* a, const float* b, int64_t n);

}  // namespace memra::kernels::cpu
