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
  float prob = 0.0f;  // filled by SoftmaxCandidates
};

// The k highest logits (all n when k <= 0 or k >= n), sorted by logit descending, ties by id.
std::vector<TokenCandidate> TopKCandidates(const float* logits, int64_t n, int k);
// logit /= temperature for every candidate (temperature > 0).
void ApplyTemperature(std::vector<TokenCandidate>& c, float temperature);
// prob = softmax over the candidates' logits (candidates non-empty).
void SoftmaxCandidates(std::vector<TokenCandidate>& c);
// Keeps the shortest prefix of candidates (sorted, probs filled) whose cumulative probability
// reaches top_p, at least one; renormalizes probs. top_p >= 1 keeps all.
void TopPFilter(std::vector<TokenCandidate>& c, float top_p);
// llama_sampler_min_p: keeps the candidates whose logit is >= max logit + log(min_p), i.e. whose
// probability is at least min_p times the most likely one's (at least one kept). Candidates
// sorted by logit descending (as TopKCandidates leaves them). min_p <= 0 keeps all.
void MinPFilter(std::vector<TokenCandidate>& c, float min_p);

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

// llama.cpp's default chain (common_sampler: penalties, top-k, top-p, min-p, temperature, dist;
// the stages llama.cpp has and memra does not, DRY, typical, XTC, top-n-sigma, are off by
// default there). `history` is what llama.cpp's penalties sampler has accepted: the tokens of the
// context so far, prompt included (llama-cli and llama-server accept the prompt tokens too).
// temperature <= 0: greedy, the argmax of the (penalized) logits, as llama.cpp's temperature
// stage at temp <= 0 keeps only the largest logit (top-k / top-p / min-p never drop it); without
// penalties this is plain Argmax. Otherwise the penalized logits go through top-k, top-p (on the
// untempered distribution), min-p (untempered), temperature, then a draw from the softmax of the
// remaining candidates with u = 53 random bits of rng in [0, 1).
int32_t SampleToken(const float* logits, int64_t n_vocab, const SamplingParams& params, std::mt19937_64& rng,
                    absl::Span<const int32_t> history = {});

}  // namespace memra::kernels::cpu
