// The shared fixtures' models and reference logits as the families' executor tests compare them:
// paths, a row-wise logits difference, test-parameter names, and the chunking / decode invariance
// every family's CPU executor must show.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "tests/LoadedModel.h"

namespace memra::testing {

std::string FixtureModelPath(const std::string& model);  // ../shared/fixtures/models/MODEL.gguf
std::string FixtureRefPath(const std::string& model, const std::string& file);

struct LogitsDiff {
  double max_abs = 0;       // largest |got - ref|
  double rms_rel = 0;       // rms(got - ref) / rms(ref), over every compared row
  double max_row_nmse = 0;  // the worst row's sum (got - ref)^2 / sum ref^2
  int argmax_equal = 0;     // rows whose argmax agrees
};
// Over the rows both hold ([rows, vocab] row-major).
LogitsDiff CompareLogits(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab);

// A fixture name as a test-parameter name (non-alphanumerics as '_').
std::string FixtureParamName(const ::testing::TestParamInfo<const char*>& info);

// Chunks of 5, 7 and 13 give the one call's logits, and a decode step after the prompt's prefix
// gives the last row of the whole prompt's prefill (all-logits @prefill), each within `tol`.
void ExpectChunkingAndDecodeInvariant(LoadedModel& model, absl::Span<const int32_t> prompt, int64_t vocab, double tol);

}  // namespace memra::testing
