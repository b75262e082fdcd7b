// A GGUF lowered and bound to the CPU executor, with the calls the model tests make: prefill,
// decode, chunked prefill (logits as flat f32 vectors). Shared by the families' executor tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "frontends/LowerOptions.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Module.h"
#include "runtime/cpu/CpuExecutor.h"

namespace memra::testing {

struct LoadedModel {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<ir::Module> module;
  std::unique_ptr<runtime::CpuExecutor> exec;

  // Logits of `tokens` at the next positions through @prefill / @decode.
  absl::StatusOr<std::vector<float>> Call(absl::string_view fn, absl::Span<const int32_t> tokens);
  absl::StatusOr<std::vector<float>> Prefill(absl::Span<const int32_t> tokens) { return Call("prefill", tokens); }
  absl::StatusOr<std::vector<float>> Decode(int32_t token) { return Call("decode", {&token, 1}); }
  // Chunked prefill: the concatenated logits of every chunk.
  absl::StatusOr<std::vector<float>> PrefillChunked(absl::Span<const int32_t> tokens, int64_t chunk);
  // n greedy tokens after `prompt`: @prefill, then @decode of each pick (argmax of the last row).
  absl::StatusOr<std::vector<int32_t>> Greedy(absl::Span<const int32_t> prompt, int64_t n);
};

absl::StatusOr<LoadedModel> LoadModel(const std::string& path, const frontends::LowerOptions& lo,
                                      runtime::WeightMode mode = runtime::WeightMode::kPerRow);

}  // namespace memra::testing
