// Softmax, argmax and the token-sampling helpers (top-k, top-p, temperature).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

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

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax)
  int top_k = 0;             // <= 0: off
  float top_p = 1.0f;        // >= 1: off
};

// Greedy argmax when temperature <= 0. Otherwise, in llama.cpp's default chain order:
// top-k, top-p (on the untempered distribution), temperature, then a draw from the softmax of
// the remaining candidates with u = 53 random bits of rng in [0, 1).
int32_t SampleToken(const float* logits, int64_t n_vocab, const SamplingParams& params, std::mt19937_64& rng);

}  // namespace memra::kernels::cpu
