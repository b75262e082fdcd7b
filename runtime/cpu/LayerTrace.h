// The `--trace-layers` checksum: one line per layer output (llama.cpp's node names
// model.input_embed, l_out-N, result_norm, result_output), so a run can be compared with the
// fixture's per-node dump (fixtures/README.md §5) and a mismatch located to one layer.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace memra::runtime {

struct Checksum {
  int64_t n = 0;
  double sum = 0;     // Σ x (double accumulation)
  double rms = 0;     // sqrt(Σ x² / n)
  double absmax = 0;  // max |x|
};

Checksum ComputeChecksum(const float* x, int64_t n);

// The values --trace-layers reports (by IR value name).
bool IsLayerTraceValue(absl::string_view name);

// "trace l_out-3            f32[48, 256]  sum -1.234567e+01  rms 1.912345e+00  absmax 8.1e+00".
std::string FormatTraceLine(absl::string_view name, absl::string_view type, const Checksum& c);

}  // namespace memra::runtime
