#include "kernels/cpu/Sampling.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

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

void MinPFilter(std::vector<TokenCandidate>& c, float min_p) {
  if (min_p <= 0.0f || c.empty()) return;
  float mx = c[0].logit;
  for (const auto& x : c) mx = std::max(mx, x.logit);
  const float min_logit = mx + std::log(min_p);
  size_t keep = 1;  // the first (largest) always stays
  while (keep < c.size() && c[keep].logit >= min_logit) ++keep;
  c.resize(keep);
}

bool PenaltiesEnabled(const SamplingParams& p) {
  return p.repeat_last_n != 0 &&
         (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f);
}

absl::Status CheckSamplingParams(const SamplingParams& p) {
  auto finite = [](absl::string_view name, float v) -> absl::Status {
    if (std::isfinite(v)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("sampling: ", name, " must be finite (got ", v, ")"));
  };
  for (auto [name, v] : {std::pair<absl::string_view, float>{"temperature", p.temperature},
                         {"top_p", p.top_p},
                         {"min_p", p.min_p},
                         {"repeat_penalty", p.repeat_penalty},
                         {"presence_penalty", p.presence_penalty},
                         {"frequency_penalty", p.frequency_penalty}})
    if (absl::Status st = finite(name, v); !st.ok()) return st;
  if (p.repeat_penalty <= 0.0f || !std::isfinite(1.0f / p.repeat_penalty))
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: repeat_penalty must be greater than 0 (got ", p.repeat_penalty, "; 1 = off)"));
  if (p.repeat_last_n < -1)
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: repeat_last_n must be -1 (the whole context), 0 (off) "
                     "or a token count (got ",
                     p.repeat_last_n, ")"));
  return absl::OkStatus();
}

void ApplyPenalties(float* logits, int64_t n_vocab, absl::Span<const int32_t> history, const SamplingParams& p) {
  if (!PenaltiesEnabled(p) || history.empty()) return;
  // The window llama.cpp's ring buffer of the last penalty_last_n accepted tokens holds.
  // (llama.cpp maps -1 to the context size, i.e. everything the context holds, until August
  // 2026; its newest CLI refuses -1.)
  const size_t n =
      p.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(p.repeat_last_n));
  std::vector<int32_t> window(history.end() - n, history.end());
  std::sort(window.begin(), window.end());
  for (size_t i = 0; i < window.size();) {
    size_t j = i;
    while (j < window.size() && window[j] == window[i]) ++j;
    const int32_t id = window[i];
    const int count = static_cast<int>(j - i);
    i = j;
    if (id < 0 || id >= n_vocab) continue;
    float& l = logits[id];
    // Dividing a negative logit would make the token more likely: negative ones are multiplied
    // (llama.cpp's fix of the CTRL paper's rule).
    if (l <= 0)
      l *= p.repeat_penalty;
    else
      l /= p.repeat_penalty;
    l -= static_cast<float>(count) * p.frequency_penalty + static_cast<float>(count > 0) * p.presence_penalty;
  }
}

int32_t SampleToken(const float* logits, int64_t n_vocab, const SamplingParams& params, std::mt19937_64& rng,
                    absl::Span<const int32_t> history) {
  std::vector<float> penalized;
  if (PenaltiesEnabled(params) && !history.empty()) {
    penalized.assign(logits, logits + n_vocab);
    ApplyPenalties(penalized.data(), n_vocab, history, params);
    logits = penalized.data();
  }
  if (params.temperature <= 0.0f) return Argmax(logits, n_vocab);
  std::vector<TokenCandidate> c = TopKCandidates(logits, n_vocab, params.top_k);
  if (params.top_p < 1.0f) {
    SoftmaxCandidates(c);
    TopPFilter(c, params.top_p);
  }
  MinPFilter(c, params.min_p);
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
