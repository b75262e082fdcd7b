// A generation session on one model: GGUF -> lowered module -> executor (CPU or CUDA,
// runtime/Executor.h; + the tokenizer
// from the GGUF's metadata). Tokenize, prefill in chunks, then decode with sampling, streaming
// detokenized text through a callback; stops at end-of-generation tokens.
//
//   auto s = Session::Open("model.gguf", {});
//   auto ids = s->Tokenize("Hello");
//   auto stats = s->Generate(*ids, params, [](int32_t id, absl::string_view text) {
//     std::cout << text << std::flush;
//     return true;  // false stops the generation
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "frontends/LowerOptions.h"
#include "ir/Module.h"
#include "kernels/cpu/Sampling.h"
#include "runtime/Executor.h"
#include "runtime/cpu/CpuExecutor.h"

namespace memra::gguf {
class GgufFile;
}
namespace memra::tokenizer {
class Tokenizer;
}

namespace memra::runtime {

struct SessionOptions {
  int threads = 0;  // 0: all cores
  WeightMode weight_mode = WeightMode::kPerRow;
  int64_t n_ctx = 0;                    // 0: min(context_length, 4096)
  frontends::KvCacheTypes cache_types;  // the KV cache's element types (-ctk / -ctv)
  // Keep the logits of every prompt position (costs a [T, n_vocab] head per chunk).
  bool prompt_logits = false;
  // Prefill chunk size in tokens; 0: the whole prompt in one call (at most 4096 per call).
  int64_t chunk = 512;
  bool profile = false;  // per-op-kind timing (both executors)
  // Greedy generation runs the decode loop this many steps per executor call (on CUDA: on the
  // device, one graph launch per step, the host reading the tokens once per chunk). Steps past a
  // stop (end of generation) inside a chunk are computed and dropped, so the state then holds
  // them: Generate/Prefill/Decode refuse to continue until Reset(). 1 = exact continuation;
  // 0 = the host samples every step from the downloaded logits.
  int64_t decode_chunk = 16;
  Backend backend = Backend::kCpu;
  CudaExecutorOptions cuda;         // backend kCuda (its profile flag follows `profile`)
  uint64_t host_memory_budget = 0;  // backend kCpu: CpuExecutorOptions::memory_budget
  // Runs on the lowered module before the executor is built (memra run: the compile pipeline,
  // passes/Pipelines.h). Not called for a module given to Open (a plan's, already compiled).
  std::function<absl::Status(ir::Module&)> compile;
};

struct GenerationParams {
  int64_t n_predict = 32;                 // new tokens at most
  kernels::cpu::SamplingParams sampling;  // temperature 0 = greedy
  uint64_t seed = 0;
  bool stop_at_eog = true;  // stop after an end-of-generation token
  // Greedy on the device loop: one step per DecodeGreedy call whatever options().decode_chunk,
  // so a stop leaves no steps past it and the session continues exactly (a chat's next turn).
  bool exact_stop = false;
};

struct GenerationStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;
  int64_t n_decode_calls = 0;  // decode steps run (incl. steps past a stop)
  double prefill_seconds = 0;
  double decode_seconds = 0;  // decode calls + sampling of generated tokens
  bool stopped_at_eog = false;
  bool stopped_at_context = false;  // the KV cache is full
  std::vector<int32_t> tokens;      // generated ids
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? n_prompt / prefill_seconds : 0; }
  double decode_tokens_per_second() const { return decode_seconds > 0 ? n_decode_calls / decode_seconds : 0; }
};

// Called for every generated token with the text that became complete (valid UTF-8, possibly
// empty), and once more with id -1 for text held back at the end (an incomplete UTF-8 tail).
// Return false to stop.
using TokenCallback = std::function<bool(int32_t id, absl::string_view text)>;

class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Open(const std::string& path, const SessionOptions& options = {});
  // A session on a module compiled earlier (a plan's IR) with the weights and tokenizer of
  // `file`. Its n_ctx and prefill logits are the module's (options.n_ctx is ignored; asking for
  // prompt_logits of a module that keeps only the last row is an error).
  static absl::StatusOr<std::unique_ptr<Session>> Open(std::unique_ptr<gguf::GgufFile> file,
                                                       std::unique_ptr<ir::Module> module,
                                                       const SessionOptions& options = {});
  ~Session();

  const gguf::GgufFile& file() const { return *file_; }
  const ir::Module& module() const { return *module_; }
  Executor& executor() { return *exec_; }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t context_length() const { return exec_->context_capacity(); }
  int64_t position() const { return exec_->position(); }
  const SessionOptions& options() const { return options_; }

  // The tokenizer, or null when the GGUF's tokenizer could not be built (tokenizer_status()).
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const absl::Status& tokenizer_status() const { return tokenizer_status_; }
  // Text -> ids (BOS as the model says); error if there is no tokenizer.
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const;

  // Prefills `tokens` at the current position in chunks (options().chunk). Returns the logits of
  // the last token; with options().prompt_logits, `all` (if given) receives [n, n_vocab].
  // Errors: tokens beyond the context (before anything runs), ids outside the vocabulary.
  absl::StatusOr<std::vector<float>> Prefill(absl::Span<const int32_t> tokens, std::vector<float>* all = nullptr);
  // What Prefill checks of `tokens` before running anything: they fit the context after the
  // current position and every id is in the vocabulary (a driver asks before it echoes a prompt).
  absl::Status CheckPrompt(absl::Span<const int32_t> tokens) const;
  // Runs one token through @decode; returns its logits.
  absl::StatusOr<std::vector<float>> Decode(int32_t token);

  // Prefill `prompt`, then sample up to n_predict tokens, decoding each but the last. Sampling
  // is kernels::cpu::SampleToken over history() (params.sampling checked first). Greedy
  // generation (temperature <= 0) without penalties runs Executor::DecodeGreedy in chunks of
  // options().decode_chunk (> 0); with penalties every step is sampled on the host.
  absl::StatusOr<GenerationStats> Generate(absl::Span<const int32_t> prompt, const GenerationParams& params,
                                           const TokenCallback& on_token = nullptr,
                                           std::vector<float>* prompt_logits = nullptr);

  // Forgets everything (position 0).
  absl::Status Reset() {
    overrun_steps_ = 0;
    history_.clear();
    return exec_->ResetState();
  }
  // The tokens the state holds, in order: everything Prefill, Decode and Generate ran since the
  // last Reset (size() == position()). Generate's penalties stage counts its tail (llama.cpp's
  // penalties sampler accepts the prompt tokens too), so a conversation fed turn by turn is
  // penalized over all of it, not only the current turn.
  const std::vector<int32_t>& history() const { return history_; }
  // Decode steps the state holds past the last generation's stop (see decode_chunk).
  int64_t overrun_steps() const { return overrun_steps_; }

 private:
  Session() = default;
  absl::Status Init();
  // Runs `tokens` through @prefill; in a bucketed module (bucket-shapes) a chunk of exactly N
  // tokens runs @prefill_tN, other sizes the generic @prefill (kept by keep-generic), or, without
  // it, @prefill_tN pieces (largest first) and @decode per token below the smallest bucket.
  // Appends the logits rows the module returns to `rows`.
  absl::Status RunPrefill(absl::Span<const int32_t> tokens, std::vector<float>& rows);

  SessionOptions options_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  absl::Status tokenizer_status_;
  int64_t n_vocab_ = 0;
  int64_t overrun_steps_ = 0;
  std::vector<int32_t> history_;  // see history()
  absl::Status CheckContinuable() const;
  std::vector<std::pair<int64_t, std::string>> buckets_;  // (T, function), descending T
};

}  // namespace memra::runtime
