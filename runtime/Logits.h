// The check of non-finite logits shared by every decoding path: a NaN or inf (from the weights,
// or an overflow in the computation) would be picked as token 0 forever and scored as "nan", so
// the host sampler (Session), Executor::DecodeGreedy on both backends and perplexity stop with
// one error, worded the same everywhere.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace memra::runtime {

// The lowest index whose value is NaN or +-inf; -1 when all n are finite.
int64_t FirstNonFiniteLogit(const float* logits, int64_t n);

// DataLoss: "the logits after <step> are not finite (<value> at vocabulary id <id>): the model's
// weights or its computation produced NaN/inf". `step` names where: "the prompt (3 tokens)",
// "decode step 7".
absl::Status NonFiniteLogitsError(absl::string_view step, float value, int64_t id);

// OK when all n logits are finite, else NonFiniteLogitsError at the first one.
absl::Status CheckFiniteLogits(const float* logits, int64_t n, absl::string_view step);

}  // namespace memra::runtime
