#include "kernels/cpu/Matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace memra::kernels::cpu {
namespace {

// Records the first error raised by any worker.
class FirstError {
 public:
  void Set(absl::Status st) {
    if (st.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = std::move(st);
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  absl::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  absl::Status status_;
  std::atomic<bool> failed_{false};
};

absl::Status CheckDecodable(const WeightView& w) {
  if (!CanDecode(w.type))
    return absl::UnimplementedError(
        absl::StrCat("no dequantizer for ggml type ", gguf::GgmlTypeName(w.type)));
  return absl::OkStatus();
}

// Row r of w as f32: a pointer into the weight itself for aligned F32 data, else decoded into buf.
const float* RowF32(const WeightView& w, int64_t r, std::vector<float>& buf, FirstError& err) {
  const uint8_t* p = w.Row(r);
  if (w.type == gguf::GgmlType::kF32 && reinterpret_cast<uintptr_t>(p) % alignof(float) == 0)
    return reinterpret_cast<const float*>(p);
  buf.resize(static_cast<size_t>(w.cols));
  err.Set(DequantizeRow(w, r, buf.data()));
  return buf.data();
}

}  // namespace

float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

absl::Status Embed(const WeightView& table, absl::Span<const int32_t> ids, float* out,
                   ThreadPool* pool) {
  if (auto st = CheckDecodable(table); !st.ok()) return st;
  for (size_t t = 0; t < ids.size(); ++t)
    if (ids[t] < 0 || ids[t] >= table.rows)
      return absl::OutOfRangeError(absl::StrCat("token id ", ids[t], " at position ", t,
                                                " is outside the vocabulary [0, ", table.rows, ")"));
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
      for (int64_t t = 0; t < T; ++t) y[t * N + n] = Dot(x + t * K, wr, K);
    }
  });
  return err.status();
}

}  // namespace memra::kernels::cpu
