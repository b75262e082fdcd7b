// Shared helpers for the gtest suites: where the test data lives, reading raw fixture arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"
#include "runtime/cpu/HostTensor.h"

namespace memra::testing {

// tests/data in the source tree (small fixtures copied from ../shared/fixtures).
std::string TestDataPath(const std::string& rel);
// ../shared beside the checkout (large fixtures; tests that need it skip when it is absent).
std::string SharedPath(const std::string& rel);
// Path of the built `memra` driver (for tests that run the CLI).
std::string MemraBinary();

absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path);
absl::StatusOr<std::vector<float>> ReadF32File(const std::string& path);
absl::StatusOr<std::vector<int32_t>> ReadI32File(const std::string& path);
bool FileExists(const std::string& path);
// The "greedy_tokens" array of a fixture's exact reference (exact_dequant.logits_batch.greedy.json).
absl::StatusOr<std::vector<int32_t>> ReadGreedyTokens(const std::string& json_path);

// A path under the test temp dir that no other test writes: ctest runs every TEST as its own
// process, in parallel, so a fixed name shared by two tests races (one renames its .tmp while
// the other's write replaces it). The name carries the running test's name (one process runs a
// test at a time, and a rerun overwrites its own files rather than leaving more behind).
std::string UniqueTempPath(const std::string& name);

// The shared fixtures' prompt (../shared/fixtures/README.md §3): BOS followed by the bytes of
// "The quick brown fox jumps over the lazy dog. 12" as byte tokens (byte b -> id 3 + b).
extern const std::vector<int32_t> kFixturePrompt;
inline constexpr int64_t kFixtureVocab = 259;

// The index in a greedy continuation (of kFixturePrompt) of its first token, from the third to
// the last but one, that neither the prompt nor an earlier token is (-1 if none): with that
// token's embedding row NaN, the prompt and the decode steps before the one that reads it stay
// finite, and that step's logits are all NaN.
int64_t FirstFreshToken(const std::vector<int32_t>& tokens);

// Writes a copy of the GGUF at `src` to `dst` with row `row` of the 2-D tensor `tensor` made NaN
// (f32: every value; q8_0: every block's scale), for the checks of non-finite logits: a NaN row
// of output.weight makes one logit NaN at every step, one of token_embd.weight every logit of the
// step that reads that token.
absl::Status WriteWithNanRow(const std::string& src, const std::string& tensor, int64_t row, const std::string& dst);

// Runs `pipeline` (a --passes string; the codegen passes registered) over `m`, verifying after
// every pass.
absl::Status CompileModule(ir::Module& m, absl::string_view pipeline);

// n values drawn from N(0, scale^2) with a fixed seed (never all zeros: kernels are checked on
// random data).
std::vector<float> RandomNormal(size_t n, uint64_t seed, float scale = 1.0f);

// The ops of `kind` in every function of `m` (a fusion test's count before and after its pass).
int CountOpsOfKind(const ir::Module& m, ir::OpKind kind);

// Whether two tensors hold the same bytes (a fused op against the ops it replaces, bit for bit).
bool SameBytes(const runtime::HostTensor& a, const runtime::HostTensor& b);

}  // namespace memra::testing
