// Rotary position embedding, NeoX pairing, partial (first n_rot dims of each head).
#pragma once

#include <cstdint>

namespace memra::kernels::cpu {

// In place on x [T][n_head * head_dim]. For token t at position p = positions[t], each head's
// pairs (i, i + n_rot/2), i < n_rot/2, rotate by θ_i = p · freq_base^(-2i/n_rot):
//   x'[i]          = x[i]·cos θ_i − x[i+n_rot/2]·sin θ_i
//   x'[i+n_rot/2]  = x[i]·sin θ_i + x[i+n_rot/2]·cos θ_i
// dims n_rot..head_dim-1 are untouched. θ_i is formed as ggml does (θ_0 = p, θ_{i+1} = θ_i · s
// with s = freq_base^(-2/n_rot) in f32), so results match llama.cpp to the ulp of cos/sin.
// Requires n_rot even, 0 < n_rot <= head_dim. qwen35's text-only IMROPE equals this (fixture
// README §2.1). freq_factors (or null: all 1) divide each θ_i before its cos / sin
// (ggml_rope_ext's rope_cache_init, ext_factor 0): a factor of 1e30 leaves pair i unrotated.
void RopeNeox(float* x, int64_t T, int64_t n_head, int64_t head_dim, int64_t n_rot, float freq_base,
              const int32_t* positions, const float* freq_factors = nullptr);

}  // namespace memra::kernels::cpu
