// Softmax, argmax and the token-sampling helpers: llama.cpp's sampler chain (penalties, top-k,
// top-p, min-p, temperature, dist) as common_sampler builds it by default.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace memra::kernels::cpu {

// Row softmax of x [rows][cols] into out (may alias x): max-subtracted, exp in f32, the sum
// accumulated in double.
void Softmax(const float* x, int64_t rows, int64_t cols, float* out);

// Index of the largest element of x[0..n) (n >= 1); ties go to the lowest index, NaNs are
// never selected unless every element is NaN (then 0).
int32_t Argmax(const float* x, int64_t n);

struct TokenCandidate {
  int32_t id = 0;
  float logit = 0.0f;
};

// The k highest logits (all n when k <= 0 or k >= n), sorted by logit descending, ties by id.
std::vector<TokenCandidate> TopKCandidates(const float* logits, int64_t n, int k);

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax)
  int top_k = 0;             // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  // llama_sampler_penalties over the last repeat_last_n tokens of the history (-1: all of it,
  // 0: off): a token seen `count` > 0 times gets logit / repeat_penalty (logit > 0) or
  // logit * repeat_penalty (logit <= 0), then - count * frequency_penalty - presence_penalty.
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;   // 0: off
  float frequency_penalty = 0.0f;  // 0: off
};

// Whether the penalties stage changes anything (llama_sampler_penalties::is_disabled negated):
// repeat_last_n != 0 and one of the three penalties is not neutral.
bool PenaltiesEnabled(const SamplingParams& params);

// Errors (InvalidArgument, naming the field and the value) for parameters the chain cannot use:
// non-finite values, repeat_penalty <= 0 (llama.cpp's common_sampler refuses the same),
// repeat_last_n < -1.
absl::Status CheckSamplingParams(const SamplingParams& params);

// The penalties stage on logits[0..n_vocab) in place: each id's count in the window (the last
// repeat_last_n entries of history, all of them for -1) as in SamplingParams. History ids outside
// the vocabulary are ignored. No-op unless PenaltiesEnabled.
void ApplyPenalties(float* logits, int64_t n_vocab, absl::Span<const int32_t> history, const SamplingParams& params);

// memra's sampler on one row: the `sample` op (ir/Ops.def) and the device sampler decide with the
// same arithmetic (kernels/cuda/SampleMath.cuh; docs/design/sampling.md). `params` holds
// SMP_PARAMS floats (RowSampling's fields in order); the penalties are (id, count) pairs applied
// in order (ids outside the vocabulary and counts <= 0 are skipped). Returns -1 when a raw logit
// is NaN or +-inf. temperature <= 0: the argmax of the penalized logits (Argmax's rule).
// Otherwise, in the order by logit descending (ties by the lower id): keep the top_k, then the
// shortest prefix whose untempered weight reaches top_p of theirs, then the logits >= max +
// min_p_logit, and draw the first id (ascending) whose cumulative tempered weight exceeds
// u * total; weights are 2^-40-unit integers (exact, order-free sums).
int32_t SampleRow(const float* logits, int64_t n_vocab, const float* params, const int32_t* penalty_ids,
                  const int32_t* penalty_counts, int64_t n_penalties);

// One row's sampler inputs as the `sample` op takes them.
struct RowSampling {
  float params[8] = {};              // SMP_PARAMS: temperature, top_k, top_p, min_p logit, u, penalties
  std::vector<int32_t> penalty_ids;  // ascending, each once
  std::vector<int32_t> penalty_counts;
};
// The row inputs of llama.cpp's default chain (common_sampler: penalties, top-k, top-p, min-p,
// temperature, dist; the stages llama.cpp has and memra does not, DRY, typical, XTC, top-n-sigma,
// are off by default there) for `params`: the penalty window is the last repeat_last_n entries of
// `history` (all of it for -1), what llama.cpp's penalties sampler has accepted (the context so far,
// prompt included); u is the draw (DrawU), unused when greedy.
RowSampling MakeRowSampling(const SamplingParams& params, absl::Span<const int32_t> history, float u);
// The draw of one sampled token: 24 random bits of rng as a float in [0, 1).
float DrawU(std::mt19937_64& rng);

// SampleRow on MakeRowSampling(params, history, DrawU(rng)); rng advances only when temperature > 0
// (greedy draws nothing). -1 for a row with a NaN or inf.
int32_t SampleToken(const float* logits, int64_t n_vocab, const SamplingParams& params, std::mt19937_64& rng,
                    absl::Span<const int32_t> history = {});

}  // namespace memra::kernels::cpu
