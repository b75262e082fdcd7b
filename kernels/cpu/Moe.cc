#include "kernels/cpu/Moe.h"
#include "kernels/cpu/FirstError.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/Elementwise.h"
#include "kernels/cpu/Matmul.h"
#include "kernels/cpu/Sampling.h"

namespace memra::kernels::cpu {
namespace {}  // namespace

void MoeRoute(const float* logits, int64_t T, int64_t E, int64_t k, float* weights, int32_t* ids,
              const float* expert_scale) {
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    Softmax(logits + t * E, 1, E, p.data());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i) sum += p[order[i]];
    sum = std::max(sum, 6.103515625e-5f);
    for (int64_t i = 0; i < k; ++i) {
      ids[t * k + i] = order[i];
      weights[t * k + i] = p[order[i]] / sum;
      if (expert_scale != nullptr) weights[t * k + i] *= expert_scale[order[i]];
    }
  }
}

void MoeRouteSigmoid(const float* logits, int64_t T, int64_t E, int64_t k, const float* bias, bool norm, float scale,
                     float* weights, int32_t* ids) {
  std::vector<float> p(static_cast<size_t>(E)), sel(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    Sigmoid(logits + t * E, E, p.data());
    for (int64_t e = 0; e < E; ++e) sel[e] = bias != nullptr ? p[e] + bias[e] : p[e];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return sel[a] > sel[b] || (sel[a] == sel[b] && a < b); });
    float* w = weights + t * k;
    for (int64_t i = 0; i < k; ++i) {
      ids[t * k + i] = order[i];
      w[i] = p[order[i]];
    }
    if (norm) {
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) sum += w[i];
      sum = std::max(sum, 6.103515625e-5f);
      for (int64_t i = 0; i < k; ++i) w[i] /= sum;
    }
    if (scale != 0.0f && scale != 1.0f)
      for (int64_t i = 0; i < k; ++i) w[i] *= scale;
  }
}

absl::Status MoeExperts(const float* x, int64_t T, int64_t K, const float* weights, const int32_t* ids, int64_t k,
                        const MoeExpertWeights& w, float* y, ThreadPool* pool) {
  const int64_t E = w.n_expert, F = w.n_ff;
  const int64_t gate_rows = w.fused ? 2 * F : F;
  if (w.gate.rows != E * gate_rows || w.gate.cols != K || w.down.rows != E * K || w.down.cols != F ||
      (!w.fused && (w.up.rows != E * F || w.up.cols != K)))
    return absl::InvalidArgumentError(
        absl::StrCat("moe experts: expert matrices disagree with E = ", E, ", F = ", F, ", K = ", K));
  for (const WeightView* v : {&w.gate, &w.up, &w.down})
    if ((v != &w.up || !w.fused) && !CanDecode(v->type))
      return absl::UnimplementedError(
          absl::StrCat("moe experts: no dequantizer for ggml type ", formats::GgmlTypeName(v->type)));
  // Group the (token, slot) pairs by expert: slot s = t * k + i.
  const int64_t S = T * k;
  const int64_t routed = w.n_routed > 0 ? w.n_routed : E;
  // Each slot's expert in the stacks, -1 for another part's (expert parallelism: it adds 0).
  std::vector<int32_t> local(static_cast<size_t>(S));
  std::vector<int64_t> count(static_cast<size_t>(E) + 1, 0);
  for (int64_t s = 0; s < S; ++s) {
    if (ids[s] < 0 || ids[s] >= routed)
      return absl::OutOfRangeError(
          absl::StrCat("moe experts: token ", s / k, " selects expert ", ids[s], ", outside [0, ", routed, ")"));
    const int64_t e = ids[s] - w.first_expert;
    local[s] = e >= 0 && e < E ? static_cast<int32_t>(e) : -1;
    if (local[s] >= 0) ++count[local[s] + 1];
  }
  std::vector<int64_t> start(count.size(), 0);
  std::partial_sum(count.begin(), count.end(), start.begin());
  std::vector<int64_t> slots(static_cast<size_t>(start[E]));
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t s = 0; s < S; ++s)
      if (local[s] >= 0) slots[fill[local[s]]++] = s;
  }
  std::vector<int32_t> active;
  for (int32_t e = 0; e < E; ++e)
    if (start[e + 1] > start[e]) active.push_back(e);
  const int64_t A = static_cast<int64_t>(active.size());

  FirstError err;
  // h[s][0..F) = silu(gate_e . x[t]) * (up_e . x[t]): each gate/up row of an expert in use decoded once.
  std::vector<float> h(static_cast<size_t>(S * F));
  ParallelFor(pool, 0, A * F, 4, [&](int64_t lo, int64_t hi) {
    std::vector<float> gbuf, ubuf;
    for (int64_t j = lo; j < hi && !err.failed(); ++j) {
      const int32_t e = active[j / F];
      const int64_t n = j % F;
      absl::StatusOr<const float*> g = RowAsF32(w.gate, e * gate_rows + n, gbuf);
      absl::StatusOr<const float*> u =
          w.fused ? RowAsF32(w.gate, e * gate_rows + F + n, ubuf) : RowAsF32(w.up, e * F + n, ubuf);
      if (!g.ok() || !u.ok()) {
        err.Set(g.ok() ? u.status() : g.status());
        break;
      }
      for (int64_t q = start[e]; q < start[e + 1]; ++q) {
        const int64_t s = slots[q];
        const float* xt = x + (s / k) * K;
        const float a = Dot(xt, *g, K);
        h[s * F + n] = GluProduct(w.gelu ? GeluScalar(a) : SiluScalar(a), Dot(xt, *u, K), w.clamp);
      }
    }
  });
  if (err.failed()) return err.status();
  // o[s][0..K) = down_e . h[s].
  std::vector<float> o(static_cast<size_t>(S * K));
  ParallelFor(pool, 0, A * K, 8, [&](int64_t lo, int64_t hi) {
    std::vector<float> dbuf;
    for (int64_t j = lo; j < hi && !err.failed(); ++j) {
      const int32_t e = active[j / K];
      const int64_t n = j % K;
      absl::StatusOr<const float*> d = RowAsF32(w.down, e * K + n, dbuf);
      if (!d.ok()) {
        err.Set(d.status());
        break;
      }
      for (int64_t q = start[e]; q < start[e + 1]; ++q) {
        const int64_t s = slots[q];
        o[s * K + n] = Dot(h.data() + s * F, *d, F);
      }
    }
  });
  if (err.failed()) return err.status();
  // The weighted sum in slot order: y = w_0 o_0, then y += w_i o_i.
  ParallelFor(pool, 0, T, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      float* yt = y + t * K;
      const float* o0 = o.data() + (t * k) * K;
      const float w0 = weights[t * k];
      for (int64_t n = 0; n < K; ++n) yt[n] = o0[n] * w0;
      for (int64_t i = 1; i < k; ++i) {
        const float* oi = o.data() + (t * k + i) * K;
        const float wi = weights[t * k + i];
        for (int64_t n = 0; n < K; ++n) yt[n] = yt[n] + oi[n] * wi;
      }
    }
  });
  return absl::OkStatus();
}

void GatedAdd(const float* a, const float* b, const float* g, int64_t rows, int64_t n, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float s = SigmoidScalar(g[r]);
    for (int64_t c = 0; c < n; ++c) y[r * n + c] = a[r * n + c] + b[r * n + c] * s;
  }
}

}  // namespace memra::kernels::cpu
