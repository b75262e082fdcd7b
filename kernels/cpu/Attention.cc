#include "kernels/cpu/Attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/Matmul.h"
#include "kernels/formats/Quant.h"

namespace memra::kernels::cpu {

void QGateSplit(const float* qg, int64_t T, int64_t n_head, int64_t head_dim, float* q, float* gate) {
  const size_t bytes = static_cast<size_t>(head_dim) * sizeof(float);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_head; ++h) {
      const float* src = qg + (t * n_head + h) * 2 * head_dim;
      std::memcpy(q + (t * n_head + h) * head_dim, src, bytes);
      std::memcpy(gate + (t * n_head + h) * head_dim, src + head_dim, bytes);
    }
}

namespace {

bool IsStoredType(formats::GgmlType t) {
  return t == formats::GgmlType::kF16 || t == formats::GgmlType::kBF16 || t == formats::GgmlType::kQ8_0;
}

// Bytes of elements [0, n) of a cache of `t` (16-bit or q8_0; n a whole number of q8_0 blocks:
// callers address whole rows, and a q8_0 cache's rows are whole blocks).
int64_t BytesOf(formats::GgmlType t, int64_t n) { return t == formats::GgmlType::kQ8_0 ? n / 32 * 34 : n * 2; }

// Rows of a cache as f32: an f32 cache's in place, a 16-bit or q8_0 cache's widened into a buffer
// (one reader per row stream: the pointer stays valid until the next call).
class RowReader {
 public:
  RowReader(ConstKvRows cache, int64_t n) : cache_(cache), n_(n) {
    if (cache.type != formats::GgmlType::kF32) buf_.resize(static_cast<size_t>(n));
  }
  const float* operator()(int64_t first) {
    if (cache_.type == formats::GgmlType::kF32) return static_cast<const float*>(cache_.data) + first;
    const auto* src = static_cast<const uint8_t*>(cache_.data) + BytesOf(cache_.type, first);
    // Every stored type converts whole rows (head-size multiples of 32 for q8_0, checked at
    // lowering); the status is always ok for them.
    (void)formats::Dequantize(cache_.type, absl::MakeConstSpan(src, static_cast<size_t>(BytesOf(cache_.type, n_))),
                              absl::MakeSpan(buf_));
    return buf_.data();
  }

 private:
  ConstKvRows cache_;
  int64_t n_;
  std::vector<float> buf_;
};

}  // namespace

absl::Status StoreKvElements(const float* src, int64_t n, KvRows cache, int64_t first) {
  if (cache.type == formats::GgmlType::kF32) {
    std::memcpy(static_cast<float*>(cache.data) + first, src, static_cast<size_t>(n) * sizeof(float));
    return absl::OkStatus();
  }
  if (!IsStoredType(cache.type))
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache of ", formats::GgmlTypeName(cache.type), ": only f32, f16, bf16 and q8_0 are stored"));
  if (cache.type == formats::GgmlType::kQ8_0 && (first % 32 != 0 || n % 32 != 0))
    return absl::InvalidArgumentError(
        absl::StrCat("q8_0 KV cache: elements ", first, "..", first + n - 1,
                     " are not whole blocks of 32 (the head size must be a multiple of 32)"));
  auto* dst = static_cast<uint8_t*>(cache.data) + BytesOf(cache.type, first);
  return formats::Quantize(cache.type, absl::MakeConstSpan(src, static_cast<size_t>(n)),
                           absl::MakeSpan(dst, static_cast<size_t>(BytesOf(cache.type, n))));
}

absl::Status KvAppend(const float* rows, int64_t T, int64_t width, int64_t P, int64_t capacity, KvRows cache,
                      int64_t ring) {
  if (cache.type == formats::GgmlType::kQ8_0 && width % 32 != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("q8_0 KV cache: rows of ", width,
                     " elements are not whole blocks of 32 (the head size must be a multiple of 32)"));
  if (ring > 0) {
    if (P < 0 || T < 0 || T > capacity - ring + 1)
      return absl::OutOfRangeError(absl::StrCat("sliding-window ring of ", capacity, " rows (window ", ring,
                                                "): a call appends at most ", capacity - ring + 1, " rows, not ", T));
    // At most two runs: up to the ring's end, then from row 0.
    const int64_t first = P % capacity, head = std::min(T, capacity - first);
    if (absl::Status st = StoreKvElements(rows, head * width, cache, first * width); !st.ok()) return st;
    return StoreKvElements(rows + head * width, (T - head) * width, cache, 0);
  }
  if (P < 0 || T < 0 || P + T > capacity)
    return absl::OutOfRangeError(absl::StrCat("KV cache overflow: appending ", T, " positions at position ", P,
                                              " to a cache of ", capacity, " positions"));
  return StoreKvElements(rows, T * width, cache, P * width);
}

namespace {

// One (query, head) row of causal attention over n_keys keys, key j at k_row(j), value j at
// v_row(j): s_j = scale . <q, k_j>, softmax in f32 with the sum in double, out = sum_j p_j v_j.
// `p` and `acc` are scratch (resized here). The one place this arithmetic lives, so the paged
// form computes exactly what the contiguous one does.
template <typename KeyRow, typename ValueRow>
void AttendRow(const float* qv, int64_t n_keys, KeyRow k_row, ValueRow v_row, int64_t head_dim, float scale,
               std::vector<float>& p, std::vector<float>& acc, float* out) {
  p.resize(static_cast<size_t>(n_keys));
  float mx = -INFINITY;
  for (int64_t j = 0; j < n_keys; ++j) {
    p[j] = Dot(qv, k_row(j), head_dim) * scale;
    mx = std::max(mx, p[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n_keys; ++j) {
    p[j] = std::exp(p[j] - mx);
    sum += p[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  acc.assign(static_cast<size_t>(head_dim), 0.0f);
  for (int64_t j = 0; j < n_keys; ++j) {
    const float pj = p[j] * inv;
    const float* vv = v_row(j);
    for (int64_t d = 0; d < head_dim; ++d) acc[d] += pj * vv[d];
  }
  std::memcpy(out, acc.data(), static_cast<size_t>(head_dim) * sizeof(float));
}

// The first key a query at position p sees: 0, or p - window + 1 in a sliding window.
int64_t FirstKey(int64_t p, int64_t window) { return window > 0 ? std::max<int64_t>(0, p - window + 1) : 0; }

}  // namespace

void CausalAttention(const float* q, int64_t T, int64_t P, ConstKvRows k_cache, ConstKvRows v_cache, int64_t n_head,
                     int64_t n_head_kv, int64_t head_dim, float scale, float* out, ThreadPool* pool, int64_t window,
                     int64_t ring_rows) {
  const int64_t group = n_head / n_head_kv;
  const int64_t q_width = n_head * head_dim, kv_width = n_head_kv * head_dim;
  ParallelFor(pool, 0, T * n_head, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> p, acc;
    RowReader k_rows(k_cache, head_dim), v_rows(v_cache, head_dim);
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t t = item / n_head, h = item % n_head, kvh = h / group;
      const int64_t off = kvh * head_dim, j0 = FirstKey(P + t, window);
      auto row = [&](int64_t j) { return ring_rows > 0 ? (j0 + j) % ring_rows : j0 + j; };
      AttendRow(
          q + t * q_width + h * head_dim, P + t + 1 - j0, [&](int64_t j) { return k_rows(row(j) * kv_width + off); },
          [&](int64_t j) { return v_rows(row(j) * kv_width + off); }, head_dim, scale, p, acc,
          out + t * q_width + h * head_dim);
    }
  });
}

absl::Status PagedAttention(const float* q, int64_t T, const int32_t* pos, const int32_t* slot, const int32_t* blocks,
                            int64_t max_blocks, int64_t block, int64_t n_blocks, ConstKvRows k_cache,
                            ConstKvRows v_cache, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                            float* out, ThreadPool* pool, int64_t window) {
  const int64_t group = n_head / n_head_kv;
  const int64_t q_width = n_head * head_dim, kv_width = n_head_kv * head_dim;
  // Every key's block, checked once per row before any work.
  for (int64_t t = 0; t < T; ++t) {
    if (slot[t] < 0) continue;
    if (pos[t] < 0 || pos[t] >= max_blocks * block)
      return absl::OutOfRangeError(absl::StrCat("paged attention: row ", t, " at position ", pos[t],
                                                " is outside the block table (", max_blocks * block, " positions)"));
    for (int64_t j = FirstKey(pos[t], window) / block; j <= pos[t] / block; ++j) {
      const int32_t b = blocks[slot[t] * max_blocks + j];
      if (b < 0 || b >= n_blocks)
        return absl::FailedPreconditionError(
            absl::StrCat("paged attention: slot ", slot[t], " has no block ", j, " (table entry ", b, ") for row ", t));
    }
  }
  ParallelFor(pool, 0, T * n_head, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> p, acc;
    RowReader k_rows(k_cache, head_dim), v_rows(v_cache, head_dim);
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t t = item / n_head, h = item % n_head, kvh = h / group;
      float* o = out + t * q_width + h * head_dim;
      if (slot[t] < 0) {
        std::fill(o, o + head_dim, 0.0f);
        continue;
      }
      const int32_t* table = blocks + slot[t] * max_blocks;
      auto row = [&](int64_t j) { return (static_cast<int64_t>(table[j / block]) * block + j % block) * kv_width; };
      const int64_t off = kvh * head_dim, j0 = FirstKey(pos[t], window);
      AttendRow(
          q + t * q_width + h * head_dim, pos[t] + 1 - j0, [&](int64_t j) { return k_rows(row(j0 + j) + off); },
          [&](int64_t j) { return v_rows(row(j0 + j) + off); }, head_dim, scale, p, acc, o);
    }
  });
  return absl::OkStatus();
}

}  // namespace memra::kernels::cpu
