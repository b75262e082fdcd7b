#include "kernels/cpu/Sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace memra::kernels::cpu {
namespace {

// Compiled with -ffp-contract=off (kernels/CMakeLists.txt): the arithmetic must be the device's.
#define MEMRA_SMP_HOST 1
#include "kernels/cuda/SampleMath.cuh"
#undef MEMRA_SMP_HOST

}  // namespace

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
  for (int64_t i = 0; i < n; ++i) c[i] = {static_cast<int32_t>(i), logits[i]};
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
  const RowSampling r = MakeRowSampling(p, history, 0.0f);
  for (size_t j = 0; j < r.penalty_ids.size(); ++j) {
    const int32_t id = r.penalty_ids[j];
    if (id < 0 || id >= n_vocab) continue;
    logits[id] =
        smp_penalize(logits[id], r.penalty_counts[j], p.repeat_penalty, p.frequency_penalty, p.presence_penalty);
  }
}

namespace {

struct Candidate {
  unsigned key;
  int32_t id;
  unsigned long long wu, wt;  // untempered and tempered weights
  float logit;
};

}  // namespace

int32_t SampleRow(const float* logits, int64_t n_vocab, const float* params, const int32_t* penalty_ids,
                  const int32_t* penalty_counts, int64_t n_penalties) {
  for (int64_t i = 0; i < n_vocab; ++i)
    if (!std::isfinite(logits[i])) return -1;
  std::vector<float> l(logits, logits + n_vocab);
  for (int64_t j = 0; j < n_penalties; ++j) {
    const int32_t id = penalty_ids[j];
    if (id < 0 || id >= n_vocab) continue;
    l[id] = smp_penalize(l[id], penalty_counts[j], params[SMP_REPEAT], params[SMP_FREQUENCY], params[SMP_PRESENCE]);
  }
  const float temp = params[SMP_TEMPERATURE];
  if (!(temp > 0.0f)) return Argmax(l.data(), n_vocab);

  unsigned max_key = 0;
  int32_t top = 0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const unsigned k = smp_key(l[i]);
    if (k > max_key) {
      max_key = k;
      top = static_cast<int32_t>(i);
    }
  }
  const float m = smp_key_value(max_key);
  // Only weighted ids can change a sum or be drawn; the others are a suffix of the order.
  std::vector<Candidate> c;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const float x = smp_sub(l[i], m);
    const unsigned long long wu = smp_weight(x), wt = smp_weight(smp_div(x, temp));
    if (wu != 0 || wt != 0) c.push_back({smp_key(l[i]), static_cast<int32_t>(i), wu, wt, l[i]});
  }
  // Order only what the stages need (candidates are in id order as built): the top k alone, all of
  // them for top-p, nothing without either (the draw walks ids).
  auto before = [](const Candidate& a, const Candidate& b) { return a.key > b.key || (a.key == b.key && a.id < b.id); };
  size_t n = c.size();
  const float top_k = params[SMP_TOP_K];
  const float top_p = params[SMP_TOP_P];
  bool sorted = false;
  if (top_k >= 1.0f && top_k < static_cast<float>(n_vocab) && static_cast<size_t>(top_k) < n) {
    n = static_cast<size_t>(top_k);
    std::partial_sort(c.begin(), c.begin() + n, c.end(), before);
    sorted = true;
  } else if (top_p < 1.0f) {
    std::sort(c.begin(), c.end(), before);
    sorted = true;
  }
  if (top_p < 1.0f) {
    unsigned long long z = 0;
    for (size_t j = 0; j < n; ++j) z += c[j].wu;
    const unsigned long long target =
        top_p > 0.0f ? static_cast<unsigned long long>(smp_dmul(static_cast<double>(top_p), static_cast<double>(z)))
                     : 0ull;
    unsigned long long cum = 0;
    for (size_t j = 0; j < n; ++j) {
      cum += c[j].wu;
      if (cum >= target) {
        n = j + 1;
        break;
      }
    }
  }
  const float min_logit = smp_add(m, params[SMP_MIN_P_LOGIT]);
  std::vector<Candidate> kept;
  unsigned long long z = 0;
  for (size_t j = 0; j < n; ++j)
    if (c[j].logit >= min_logit && c[j].wt != 0) {
      kept.push_back(c[j]);
      z += c[j].wt;
    }
  if (z == 0) return top;
  const float u = params[SMP_U];
  unsigned long long target =
      u > 0.0f ? static_cast<unsigned long long>(smp_dmul(static_cast<double>(u), static_cast<double>(z))) : 0ull;
  target = std::min(target, z - 1);
  if (sorted) std::sort(kept.begin(), kept.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  unsigned long long cum = 0;
  for (const Candidate& k : kept) {
    cum += k.wt;
    if (cum > target) return k.id;
  }
  return kept.back().id;  // unreachable: cum reaches z > target
}

RowSampling MakeRowSampling(const SamplingParams& p, absl::Span<const int32_t> history, float u) {
  RowSampling r;
  r.params[SMP_TEMPERATURE] = p.temperature;
  r.params[SMP_TOP_K] = static_cast<float>(p.top_k);
  r.params[SMP_TOP_P] = p.top_p;
  r.params[SMP_MIN_P_LOGIT] = p.min_p > 0.0f ? std::log(std::min(p.min_p, 1.0f)) : -INFINITY;
  r.params[SMP_U] = u;
  r.params[SMP_REPEAT] = p.repeat_penalty;
  r.params[SMP_FREQUENCY] = p.frequency_penalty;
  r.params[SMP_PRESENCE] = p.presence_penalty;
  if (!PenaltiesEnabled(p) || history.empty()) return r;
  // The window llama.cpp's ring buffer of the last penalty_last_n accepted tokens holds.
  const size_t n =
      p.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(p.repeat_last_n));
  std::vector<int32_t> window(history.end() - n, history.end());
  std::sort(window.begin(), window.end());
  for (size_t i = 0; i < window.size();) {
    size_t j = i;
    while (j < window.size() && window[j] == window[i]) ++j;
    r.penalty_ids.push_back(window[i]);
    r.penalty_counts.push_back(static_cast<int32_t>(j - i));
    i = j;
  }
  return r;
}

float DrawU(std::mt19937_64& rng) { return static_cast<float>(rng() >> 40) * 0x1.0p-24f; }

int32_t SampleToken(const float* logits, int64_t n_vocab, const SamplingParams& params, std::mt19937_64& rng,
                    absl::Span<const int32_t> history) {
  const float u = params.temperature > 0.0f ? DrawU(rng) : 0.0f;
  const RowSampling r = MakeRowSampling(params, history, u);
  return SampleRow(logits, n_vocab, r.params, r.penalty_ids.data(), r.penalty_counts.data(),
                   static_cast<int64_t>(r.penalty_ids.size()));
}

}  // namespace memra::kernels::cpu
