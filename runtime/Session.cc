#include "runtime/Session.h"

#include <cmath>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "ir/StatusMacros.h"
#include "runtime/Logits.h"
#include "runtime/PrefillSchedule.h"

namespace memra::runtime {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Session::~Session() {
  // The executor references the module and the file.
  exec_.reset();
  module_.reset();
}

absl::StatusOr<std::unique_ptr<Session>> Session::Open(const std::string& path, const SessionOptions& options) {
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
  MEMRA_ASSIGN_OR_RETURN(s->file_, gguf::GgufFile::Open(path));
  frontends::LowerOptions lo;
  lo.n_ctx = options.n_ctx;
  lo.cache_types = options.cache_types;
  lo.prefill_all_logits = options.prompt_logits;
  MEMRA_ASSIGN_OR_RETURN(s->module_, frontends::LowerModel(*s->file_, lo));
  if (options.compile) MEMRA_RETURN_IF_ERROR(options.compile(*s->module_));
  MEMRA_RETURN_IF_ERROR(s->Init());
  return s;
}

absl::StatusOr<std::unique_ptr<Session>> Session::Open(std::unique_ptr<gguf::GgufFile> file,
                                                       std::unique_ptr<ir::Module> module,
                                                       const SessionOptions& options) {
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
  if (options.prompt_logits && module->attrs().GetString("prefill_logits") != std::optional<std::string>("all"))
    return absl::FailedPreconditionError(
        "the compiled module's prefill returns only the last token's logits (compile with --all-logits)");
  s->file_ = std::move(file);
  s->module_ = std::move(module);
  MEMRA_RETURN_IF_ERROR(s->Init());
  return s;
}

absl::Status Session::Init() {
  n_vocab_ = module_->attrs().I64Or("n_vocab", 0);
  for (const auto& f : module_->functions())
    if (f->attrs().GetString("bucket_of") == std::optional<std::string>("prefill"))
      buckets_.emplace_back(f->attrs().I64Or("bucket", 0), f->name());
  std::sort(buckets_.rbegin(), buckets_.rend());
  if (module_->function("prefill") == nullptr && (buckets_.empty() || module_->function("decode") == nullptr))
    return absl::InvalidArgumentError("the module has neither @prefill nor @prefill_tN buckets with @decode");
  ExecutorOptions eo;
  eo.cpu.threads = options_.threads;
  eo.cpu.weight_mode = options_.weight_mode;
  eo.cpu.profile = options_.profile;
  eo.cpu.memory_budget = options_.host_memory_budget;
  eo.cuda = options_.cuda;
  eo.cuda.profile = options_.profile;
  MEMRA_ASSIGN_OR_RETURN(exec_, CreateExecutor(options_.backend, *module_, *file_, eo));
  // Compile @decode up front on the GPU, so the first generated tokens are not timed with NVRTC
  // (prefill buckets compile on first use, or come precompiled in a plan).
  if (CudaExecutor* cu = exec_->cuda(); cu != nullptr && module_->function("decode") != nullptr)
    MEMRA_RETURN_IF_ERROR(cu->Prepare("decode", 1));
  auto tok = tokenizer::Tokenizer::FromGguf(*file_);
  if (tok.ok())
    tokenizer_ = std::move(*tok);
  else
    tokenizer_status_ = tok.status();
  return absl::OkStatus();
}

absl::Status Session::RunPrefill(absl::Span<const int32_t> tokens, std::vector<float>& rows) {
  auto run = [&](absl::string_view fn, size_t start, size_t end) -> absl::Status {
    std::vector<HostTensor> args;
    args.push_back(HostTensor::FromI32(std::vector<int32_t>(tokens.begin() + start, tokens.begin() + end),
                                       {static_cast<int64_t>(end - start)}));
    MEMRA_ASSIGN_OR_RETURN(std::vector<HostTensor> out, exec_->Run(fn, std::move(args)));
    rows.insert(rows.end(), out[0].f32(), out[0].f32() + out[0].numel());
    return absl::OkStatus();
  };
  const bool generic = module_->function("prefill") != nullptr;
  const int64_t total = static_cast<int64_t>(tokens.size());
  if (buckets_.empty()) return run("prefill", 0, tokens.size());
  // A chunk of exactly a bucket's size runs its bucket function (memory-planned); any other
  // size runs in one call of the generic function when the module has it: on the CPU every call
  // reads all weights once, so pieces would cost a weight pass each.
  for (const auto& [n, fn] : buckets_)
    if (n == total) return run(fn, 0, tokens.size());
  if (generic) return run("prefill", 0, tokens.size());
  size_t pos = 0;
  while (pos < tokens.size()) {
    const int64_t left = static_cast<int64_t>(tokens.size() - pos);
    auto it = std::find_if(buckets_.begin(), buckets_.end(), [&](const auto& b) { return b.first <= left; });
    const int64_t n = it == buckets_.end() ? 1 : it->first;
    MEMRA_RETURN_IF_ERROR(run(it == buckets_.end() ? "decode" : it->second, pos, pos + n));
    pos += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Session::Tokenize(absl::string_view text) const {
  if (tokenizer_ == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("the model has no usable tokenizer (", tokenizer_status_.message(), "); pass token ids instead"));
  return tokenizer_->Encode(text);
}

absl::Status Session::CheckContinuable() const {
  if (overrun_steps_ == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the state holds ", overrun_steps_, " decode steps past the last generation's stop (greedy decoding ran ",
      options_.decode_chunk, " steps per chunk); Reset() first, or use decode_chunk 1 to continue exactly"));
}

absl::Status Session::CheckPrompt(absl::Span<const int32_t> tokens) const {
  if (tokens.empty()) return absl::InvalidArgumentError("prefill of an empty prompt");
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (position() + n > context_length())
    return absl::OutOfRangeError(absl::StrCat("context overflow: the prompt has ", n, " tokens",
                                              position() > 0 ? absl::StrCat(" (after ", position(), ")") : "",
                                              " but the context length is ", context_length(),
                                              " (raise it with --ctx-size)"));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab_)
      return absl::OutOfRangeError(absl::StrCat("token id ", tokens[i], " at prompt position ", i,
                                                " is outside the vocabulary [0, ", n_vocab_, ")"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Session::Prefill(absl::Span<const int32_t> tokens, std::vector<float>* all) {
  MEMRA_RETURN_IF_ERROR(CheckContinuable());
  MEMRA_RETURN_IF_ERROR(CheckPrompt(tokens));
  const int64_t n = static_cast<int64_t>(tokens.size());
  // A module with sliding-window rings takes at most its max_call_rows per call.
  const int64_t max_rows = std::min(kMaxPrefillChunk, module_->attrs().I64Or("max_call_rows", kMaxPrefillChunk));
  const int64_t chunk = options_.chunk > 0 ? std::min(options_.chunk, max_rows) : max_rows;
  if (all != nullptr) all->clear();
  std::vector<float> last;
  std::vector<float> rows;
  for (const auto& [start, end] : FixedPrefillChunks(n, chunk)) {
    rows.clear();
    MEMRA_RETURN_IF_ERROR(RunPrefill(tokens.subspan(start, end - start), rows));
    if (all != nullptr && options_.prompt_logits) all->insert(all->end(), rows.begin(), rows.end());
    last.assign(rows.end() - n_vocab_, rows.end());
    history_.insert(history_.end(), tokens.begin() + start, tokens.begin() + end);
  }
  return last;
}

absl::StatusOr<std::vector<float>> Session::Decode(int32_t token) {
  MEMRA_RETURN_IF_ERROR(CheckContinuable());
  if (token < 0 || token >= n_vocab_)
    return absl::OutOfRangeError(absl::StrCat("token id ", token, " is outside the vocabulary [0, ", n_vocab_, ")"));
  std::vector<HostTensor> args;
  args.push_back(HostTensor::FromI32({token}, {1}));
  MEMRA_ASSIGN_OR_RETURN(std::vector<HostTensor> out, exec_->Run("decode", std::move(args)));
  history_.push_back(token);
  return std::vector<float>(out[0].f32(), out[0].f32() + out[0].numel());
}

absl::StatusOr<GenerationStats> Session::Generate(absl::Span<const int32_t> prompt, const GenerationParams& params,
                                                  const TokenCallback& on_token, std::vector<float>* prompt_logits) {
  MEMRA_RETURN_IF_ERROR(kernels::cpu::CheckSamplingParams(params.sampling));
  GenerationStats st;
  st.n_prompt = static_cast<int64_t>(prompt.size());
  auto t0 = std::chrono::steady_clock::now();
  MEMRA_ASSIGN_OR_RETURN(std::vector<float> logits, Prefill(prompt, prompt_logits));
  MEMRA_RETURN_IF_ERROR(CheckFiniteLogits(logits.data(), static_cast<int64_t>(logits.size()),
                                          absl::StrCat("the prompt (", prompt.size(), " tokens)")));
  st.prefill_seconds = Since(t0);

  std::mt19937_64 rng(params.seed);
  std::unique_ptr<tokenizer::StreamingDecoder> detok;
  if (tokenizer_ != nullptr) {
    tokenizer::DecodeOptions dopt;
    dopt.render_special = false;
    dopt.strip_space_prefix = false;
    detok = std::make_unique<tokenizer::StreamingDecoder>(*tokenizer_, dopt);
  }
  t0 = std::chrono::steady_clock::now();
  // The device loop is a plain argmax: penalties need the host's SampleToken every step.
  const bool device_loop = params.sampling.temperature <= 0.0f && !kernels::cpu::PenaltiesEnabled(params.sampling) &&
                           options_.decode_chunk > 0;
  // Steps per DecodeGreedy call: the CPU gains nothing from chunks (its loop is on the host).
  const int64_t chunk = exec_->backend() == Backend::kCuda && !params.exact_stop ? options_.decode_chunk : 1;
  bool stop = params.n_predict <= 0;
  std::vector<int32_t> batch;
  if (!stop) batch = {kernels::cpu::SampleToken(logits.data(), n_vocab_, params.sampling, rng, history_)};
  while (!stop) {
    // Emit the batch; stop at the budget, an end-of-generation token or the callback's word.
    for (size_t j = 0; j < batch.size(); ++j) {
      const int32_t id = batch[j];
      st.tokens.push_back(id);
      ++st.n_generated;
      std::string text;
      if (detok) {
        auto piece = detok->Push(id);
        if (piece.ok()) text = std::move(*piece);
      }
      const bool eog = params.stop_at_eog && tokenizer_ != nullptr && tokenizer_->IsEog(id);
      if (eog) st.stopped_at_eog = true;
      stop = (on_token && !on_token(id, text)) || eog || st.n_generated == params.n_predict;
      if (stop) {
        // The steps that consumed batch[j..] ran although the host loop would not have run them.
        overrun_steps_ = static_cast<int64_t>(batch.size() - 1 - j);
        break;
      }
    }
    if (stop) break;
    if (position() >= context_length()) {
      st.stopped_at_context = true;
      break;
    }
    const int32_t last = batch.back();
    if (device_loop) {
      const int64_t k = std::min({chunk, params.n_predict - st.n_generated, context_length() - position()});
      // Errors name the step of this generation, as the host loop's do.
      MEMRA_ASSIGN_OR_RETURN(batch, exec_->DecodeGreedy(last, k, st.n_decode_calls + 1));
      st.n_decode_calls += k;
      // The state now holds `last` and every returned id but the newest.
      history_.push_back(last);
      if (!batch.empty()) history_.insert(history_.end(), batch.begin(), batch.end() - 1);
    } else {
      MEMRA_ASSIGN_OR_RETURN(logits, Decode(last));
      ++st.n_decode_calls;
      MEMRA_RETURN_IF_ERROR(CheckFiniteLogits(logits.data(), static_cast<int64_t>(logits.size()),
                                              absl::StrCat("decode step ", st.n_decode_calls)));
      batch = {kernels::cpu::SampleToken(logits.data(), n_vocab_, params.sampling, rng, history_)};
    }
  }
  if (detok && on_token) {
    std::string rest = detok->Flush();
    if (!rest.empty()) on_token(-1, rest);
  }
  st.decode_seconds = Since(t0);
  return st;
}

}  // namespace memra::runtime
