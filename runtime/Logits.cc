#include "runtime/Logits.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace memra::runtime {

int64_t FirstNonFiniteLogit(const float* logits, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(logits[i])) return i;
  return -1;
}

absl::Status NonFiniteLogitsError(absl::string_view step, float value, int64_t id) {
  return absl::DataLossError(absl::StrCat("the logits after ", step, " are not finite (", value, " at vocabulary id ",
                                          id, "): the model's weights or its computation produced NaN/inf"));
}

absl::Status CheckFiniteLogits(const float* logits, int64_t n, absl::string_view step) {
  const int64_t i = FirstNonFiniteLogit(logits, n);
  return i < 0 ? absl::OkStatus() : NonFiniteLogitsError(step, logits[i], i);
}

}  // namespace memra::runtime
