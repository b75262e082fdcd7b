#include "kernels/cpu/Sampling.h"

#include <algorithm>
#include <cmath>

namespace memra::kernels::cpu {

void Softmax(const float* x, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = out + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, xr[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - mx);
      sum += yr[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}

int32_t Argmax(const float* x, int64_t n) {
  int32_t best = 0;
  bool found = false;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (!found || x[i] > x[best]) {
      best = static_cast<int32_t>(i);
      found = true;
    }
  }
  return best;
}

std::vector<TokenCandidate> TopKCandidates(const float* logits, int64_t n, int k) {
  std::vector<TokenCandidate> c(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) c[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  auto better = [](const TokenCandidate& a, const TokenCandidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  if (k > 0 && k < n) {
    std::partial_sort(c.begin(), c.begin() + k, c.end(), better);
    c.resize(static_cast<size_t>(k));
  } else {
    std::sort(c.begin(), c.end(), better);
  }
  return c;
}

void ApplyTemperature(std::vector<TokenCandidate>& c, float temperature) {
  for (auto& x : c) x.logit /= temperature;
}

void SoftmaxCandidates(std::vector<TokenCandidate>& c) {
  if (c.empty()) return;
  float mx = -INFINITY;
  for (const auto& x : c) mx = std::max(mx, x.logit);
  double sum = 0.0;
  for (auto& x : c) {
    x.prob = std::exp(x.logit - mx);
    sum += x.prob;
  }
  for (auto& x : c) x.prob = static_cast<float>(x.prob / sum);
}

void TopPFilter(std::vector<TokenCandidate>& c, float top_p) {
  if (top_p >= 1.0f || c.empty()) return;
  double cum = 0.0;
  size_t keep = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    cum += c[i].prob;
    if (cum >= top_p) {
      keep = i + 1;
      break;
    }
  }
  c.resize(std::max<size_t>(1, keep));
  double sum = 0.0;
  for (const auto& x : c) sum += x.prob;
  for (auto& x : c) x.prob = static_cast<float>(x.prob / sum);
}

int32_t SampleToken(const float* logits, int64_t n_vocab, const SamplingParams& params, std::mt19937_64& rng) {
  if (params.temperature <= 0.0f) return Argmax(logits, n_vocab);
  std::vector<TokenCandidate> c = TopKCandidates(logits, n_vocab, params.top_k);
  if (params.top_p < 1.0f) {
    SoftmaxCandidates(c);
    TopPFilter(c, params.top_p);
  }
  ApplyTemperature(c, params.temperature);
  SoftmaxCandidates(c);
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  double cum = 0.0;
  for (const auto& x : c) {
    cum += x.prob;
    if (u < cum) return x.id;
  }
  return c.back().id;
}

}  // namespace memra::kernels::cpu
