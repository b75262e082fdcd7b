#include "runtime/cpu/LayerTrace.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace memra::runtime {

Checksum ComputeChecksum(const float* x, int64_t n) {
  Checksum c;
  c.n = n;
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    c.sum += x[i];
    ss += double(x[i]) * x[i];
    c.absmax = std::max(c.absmax, std::fabs(double(x[i])));
  }
  c.rms = n > 0 ? std::sqrt(ss / n) : 0;
  return c;
}

bool IsLayerTraceValue(absl::string_view name) {
  return absl::StartsWith(name, "l_out-") || name == "model.input_embed" || name == "result_norm" ||
         name == "result_output";
}

std::string FormatTraceLine(absl::string_view name, absl::string_view type, const Checksum& c) {
  return absl::StrFormat("trace %-18s %-16s sum %+.6e  rms %.6e  absmax %.4e", name, type, c.sum, c.rms, c.absmax);
}

}  // namespace memra::runtime
