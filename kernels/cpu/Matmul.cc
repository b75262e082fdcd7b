#include "kernels/cpu/Matmul.h"
#include "kernels/cpu/FirstError.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace memra::kernels::cpu {
namespace {

absl::Status CheckDecodable(const WeightView& w) {
  if (!CanDecode(w.type))
    return absl::UnimplementedError(absl::StrCat("no dequantizer for ggml type ", formats::GgmlTypeName(w.type)));
  return absl::OkStatus();
}

// Row r of w as f32 (RowAsF32); an error is recorded and the row reads as zeros.
const float* RowF32(const WeightView& w, int64_t r, std::vector<float>& buf, FirstError& err) {
  absl::StatusOr<const float*> row = RowAsF32(w, r, buf);
  if (row.ok()) return *row;
  err.Set(row.status());
  buf.assign(static_cast<size_t>(w.cols), 0.0f);
  return buf.data();
}

// R dot products of x rows xs[0..R) with one weight row w. Each result is computed exactly as
// Dot(xs[r], w, K) computes it (8 interleaved partial sums, same tail, same pairwise combine), so
// tiling tokens never changes a bit; the tile only reuses each loaded weight vector R times.
// Compiled for AVX2 and baseline x86-64 (picked at load time); no FMA contraction, so both
// clones give identical results.
using V8 = float __attribute__((vector_size(32)));  // 8 f32 lanes: one ymm, or two xmm

inline V8 Load8(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int R>
[[gnu::target_clones("avx2", "default")]] void DotTile(const float* const* xs, const float* w, int64_t K, float* out) {
  V8 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = V8{};
  int64_t i = 0;
  for (; i + 8 <= K; i += 8) {
    const V8 wv = Load8(w + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] += Load8(xs[r] + i) * wv;
  }
  for (int r = 0; r < R; ++r) {
    float a[8];
    std::memcpy(a, &acc[r], sizeof(a));
    int j = 0;
    for (int64_t ii = i; ii < K; ++ii, ++j) a[j] += xs[r][ii] * w[ii];
    out[r] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
  }
}

}  // namespace

float Dot(const float* a, const float* b, int64_t n) {
  float out;
  DotTile<1>(&a, b, n, &out);
  return out;
}

absl::Status Embed(const WeightView& table, absl::Span<const int32_t> ids, float* out, ThreadPool* pool) {
  if (auto st = CheckDecodable(table); !st.ok()) return st;
  for (size_t t = 0; t < ids.size(); ++t)
    if (ids[t] < 0 || ids[t] >= table.rows)
      return absl::OutOfRangeError(
          absl::StrCat("token id ", ids[t], " at position ", t, " is outside the vocabulary [0, ", table.rows, ")"));
  FirstError err;
  ParallelFor(pool, 0, static_cast<int64_t>(ids.size()), 4, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) err.Set(DequantizeRow(table, ids[t], out + t * table.cols));
  });
  return err.status();
}

absl::Status Matmul(const float* x, int64_t T, const WeightView& w, float* y, ThreadPool* pool) {
  if (auto st = CheckDecodable(w); !st.ok()) return st;
  const int64_t K = w.cols, N = w.rows;
  FirstError err;
  ParallelFor(pool, 0, N, 8, [&](int64_t lo, int64_t hi) {
    std::vector<float> buf;
    for (int64_t n = lo; n < hi && !err.failed(); ++n) {
      const float* wr = RowF32(w, n, buf, err);
      int64_t t = 0;
      for (; t + 4 <= T; t += 4) {
        const float* xs[4] = {x + t * K, x + (t + 1) * K, x + (t + 2) * K, x + (t + 3) * K};
        float o[4];
        DotTile<4>(xs, wr, K, o);
        for (int r = 0; r < 4; ++r) y[(t + r) * N + n] = o[r];
      }
      for (; t < T; ++t) y[t * N + n] = Dot(x + t * K, wr, K);
    }
  });
  return err.status();
}

}  // namespace memra::kernels::cpu
