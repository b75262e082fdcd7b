// `memra run MODEL.gguf`: tokenize, prefill (chunked), decode with sampling, stream the text.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "ir/Printer.h"
#include "llvm/Support/raw_ostream.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Session.h"
#include "runtime/cpu/LayerTrace.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Plan.h"
#include "tools/Command.h"
#include "tools/OptionChecks.h"
#include "tools/PassManagerFlags.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kRun(
    "run",
    "Generate text with a model (GGUF, compiled in memory, or a plan from memra compile) on the CPU or CUDA executor");
cl::opt<std::string> RunModel(cl::Positional, cl::Required, cl::desc("<model.gguf|model.plan>"), cl::sub(kRun));
// GGUF: the compile pipeline (--passes, dumps, timing) runs before the executor is built.
memra::tools::PassManagerFlags RunPmFlags(kRun, memra::passes::kDefaultPipeline.data());
cl::opt<std::string> RunPlanGguf(
    "gguf", cl::desc("With a plan: the GGUF to take the weights from (default: the path the plan records)"),
    cl::init(""), cl::sub(kRun));
cl::opt<std::string> RunArch(
    "arch", cl::desc("With a plan: refuse it unless it targets this arch (default: any for the cpu backend)"),
    cl::init(""), cl::sub(kRun));
cl::opt<std::string> RunPrompt("p",
                               cl::desc("Prompt text (tokenized with the model's tokenizer; BOS as the model says)"),
                               cl::init(""), cl::sub(kRun));
cl::alias RunPromptLong("prompt", cl::desc("Alias for -p"), cl::aliasopt(RunPrompt));
cl::opt<std::string> RunTokens("tokens", cl::desc("Prompt as comma-separated token ids, e.g. 1,87,107 (instead of -p)"),
                               cl::init(""), cl::sub(kRun));
cl::opt<int64_t> RunN("n", cl::desc("New tokens to generate at most (default: 32)"), cl::init(32), cl::sub(kRun));
cl::opt<float> RunTemp("temp", cl::desc("Sampling temperature; 0 = greedy (default: 0)"), cl::init(0.0f),
                       cl::sub(kRun));
cl::opt<int> RunTopK("top-k", cl::desc("Keep the k most likely tokens when sampling, 0 = all (default: 40)"),
                     cl::init(40), cl::sub(kRun));
cl::opt<float> RunTopP("top-p", cl::desc("Nucleus sampling mass, 1 = off (default: 0.95)"), cl::init(0.95f),
                       cl::sub(kRun));
cl::opt<uint64_t> RunSeed("seed", cl::desc("Sampling seed (default: 0)"), cl::init(0), cl::sub(kRun));
cl::opt<std::string> RunBackend(
    "backend", cl::desc("Executor: cpu or cuda (default: cuda when a CUDA GPU is present, cpu otherwise)"),
    cl::init(""), cl::sub(kRun));
cl::opt<bool> RunCudaSync(
    "cuda-sync-each-op", cl::desc("CUDA: synchronize after every op so an error names it (debugging) (default: false)"),
    cl::init(false), cl::sub(kRun));
cl::opt<bool> RunCudaGraphs("cuda-graphs",
                            cl::desc("CUDA: replay the compiled segments as CUDA graphs (captured on their "
                                     "second call); false = every op launched eagerly (default: true)"),
                            cl::init(true), cl::sub(kRun));
cl::opt<int64_t> RunDecodeChunk("decode-chunk",
                                cl::desc("Greedy decoding: decode steps per device loop call (CUDA: one graph "
                                         "launch per step, one sync per chunk); 0 = the host picks every token "
                                         "from downloaded logits (default: 16)"),
                                cl::init(16), cl::sub(kRun));
cl::opt<std::string> RunLogitsOut("logits-out",
                                  cl::desc("Write the f32 logits of every prompt position, row-major "
                                           "[n_prompt, n_vocab], to this file after prefill (default: off)"),
                                  cl::init(""), cl::sub(kRun));
cl::opt<bool> RunPrintIds("print-token-ids", cl::desc("Print the prompt and generated token ids (default: false)"),
                          cl::init(false), cl::sub(kRun));
cl::opt<int64_t> RunChunk("chunk", cl::desc("Prefill chunk size in tokens, 0 = one call (default: 512)"), cl::init(512),
                          cl::sub(kRun));
cl::opt<bool> RunTrace(
    "trace-layers",
    cl::desc("Print a checksum (sum, rms, absmax) of the embedding, every layer output "
             "(l_out-N), the final norm and the logits of each prefill call to stderr (default: false)"),
    cl::init(false), cl::sub(kRun));
cl::opt<int> RunThreads("threads", cl::desc("CPU threads, 0 = all cores (default: 0)"), cl::init(0), cl::sub(kRun));
cl::opt<int64_t> RunCtx("ctx-size", cl::desc("Context length (KV cache rows), 0 = min(model's, 4096) (default: 0)"),
                        cl::init(0), cl::sub(kRun));
cl::opt<bool> RunChat("chat", cl::desc("Wrap -p as one user message with the model's chat template (default: false)"),
                      cl::init(false), cl::sub(kRun));
cl::opt<bool> RunIgnoreEos("ignore-eos", cl::desc("Do not stop at end-of-generation tokens (default: false)"),
                           cl::init(false), cl::sub(kRun));
cl::opt<std::string> RunWeights("weights",
                                cl::desc("CPU weight handling: per-row (decode rows inside each matmul) or dequant "
                                         "(decode every matrix to f32 at load) (default: per-row)"),
                                cl::init("per-row"), cl::sub(kRun));
cl::opt<bool> RunPrintIr("print-ir",
                         cl::desc("Print the lowered module (IR text) to stderr before running (default: false)"),
                         cl::init(false), cl::sub(kRun));
cl::opt<bool> RunProfile("profile", cl::desc("Print time per op kind of each function at the end (default: false)"),
                         cl::init(false), cl::sub(kRun));
cl::opt<bool> RunNoEcho("no-echo", cl::desc("Do not print the prompt text before the generation (default: false)"),
                        cl::init(false), cl::sub(kRun));

int Fail(const absl::Status& st) {
  llvm::errs() << "memra run: " << st.ToString() << "\n";
  return 1;
}

absl::StatusOr<std::vector<int32_t>> ParseIds(absl::string_view s) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    int32_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v))
      return absl::InvalidArgumentError(absl::StrCat("--tokens: \"", part, "\" is not an integer token id"));
    ids.push_back(v);
  }
  if (ids.empty()) return absl::InvalidArgumentError("--tokens: no token ids");
  return ids;
}

int RunRun() {
  using namespace memra;
  const auto start = std::chrono::steady_clock::now();  // time to first token counts from here
  runtime::Backend backend = runtime::Backend::kCpu;
  if (RunBackend.empty()) {
    backend = runtime::DefaultBackend();
  } else {
    auto b = runtime::ParseBackend(RunBackend);
    if (!b.ok()) return Fail(b.status());
    backend = *b;
    if (backend == runtime::Backend::kCuda) {
      // Before the model is read: a clear error, not a long load first.
      if (absl::Status st = runtime::CudaAvailable(); !st.ok())
        return Fail(absl::FailedPreconditionError(
            absl::StrCat("--backend cuda: no usable CUDA GPU here (", st.message(), "); use --backend cpu")));
    }
  }
  if (RunPrompt.empty() == RunTokens.empty())
    return Fail(absl::InvalidArgumentError("give exactly one of -p TEXT or --tokens IDS"));
  if (RunN < 0) return Fail(absl::InvalidArgumentError("-n must be >= 0"));
  if (RunDecodeChunk < 0) return Fail(absl::InvalidArgumentError("--decode-chunk must be >= 0"));
  if (RunChat && RunPrompt.empty()) return Fail(absl::InvalidArgumentError("--chat needs -p TEXT"));
  runtime::SessionOptions so;
  if (absl::Status st = memra::tools::CheckThreads(RunThreads); !st.ok()) return Fail(st);
  so.threads = RunThreads;
  so.n_ctx = RunCtx;
  so.chunk = RunChunk;
  so.prompt_logits = !RunLogitsOut.empty();
  so.profile = RunProfile;
  so.backend = backend;
  so.cuda.sync_each_op = RunCudaSync;
  so.cuda.cuda_graphs = RunCudaGraphs;
  so.decode_chunk = RunDecodeChunk;
  so.cuda.progress = false;
  if (RunWeights == "per-row")
    so.weight_mode = runtime::WeightMode::kPerRow;
  else if (RunWeights == "dequant")
    so.weight_mode = runtime::WeightMode::kDequantizeAtLoad;
  else
    return Fail(absl::InvalidArgumentError("--weights must be per-row or dequant"));

  absl::StatusOr<std::unique_ptr<runtime::Session>> session;
  if (runtime::IsPlanFile(RunModel)) {
    // A plan: check it against its GGUF (and --arch) before anything else, then run its IR.
    auto plan = runtime::ReadPlan(RunModel);
    if (!plan.ok()) return Fail(plan.status());
    auto file = gguf::GgufFile::Open(RunPlanGguf.empty() ? plan->gguf.path : std::string(RunPlanGguf));
    if (!file.ok()) return Fail(file.status());
    if (absl::Status st = runtime::CheckPlanCompatible(*plan, runtime::IdentifyGguf(**file), RunArch); !st.ok())
      return Fail(absl::Status(st.code(), absl::StrCat(std::string(RunModel), ": ", st.message())));
    if (backend == runtime::Backend::kCuda && !plan->target.empty()) {
      auto device = runtime::CudaDeviceTarget(so.cuda.device);
      if (!device.ok()) return Fail(device.status());
      if (absl::Status st = runtime::CheckPlanTarget(*plan, *device); !st.ok())
        return Fail(absl::Status(st.code(), absl::StrCat(std::string(RunModel), ": ", st.message())));
    }
    auto module = runtime::LoadPlanModule(*plan);
    if (!module.ok()) return Fail(module.status());
    if (backend == runtime::Backend::kCuda) {
      // The plan's cubins: nothing is compiled at run time (a kernel missing from the table would
      // still compile, counted in the kernel line).
      auto pre = runtime::PrecompiledKernels(*plan);
      if (!pre.ok())
        return Fail(
            absl::Status(pre.status().code(), absl::StrCat(std::string(RunModel), ": ", pre.status().message())));
      so.cuda.precompiled = *pre;
    }
    session = runtime::Session::Open(std::move(*file), std::move(*module), so);
  } else {
    passes::PassManagerOptions pm_opts = RunPmFlags.Options();
    // The backend's pipeline (CUDA: with select-kernels) unless --passes says otherwise.
    if (!RunPmFlags.pipeline_given()) {
      pm_opts.pipeline = passes::PipelineForArch("cpu");
      if (backend == runtime::Backend::kCuda) {  // selected for this GPU (kernels/cuda/Target.h)
        auto target = runtime::CudaDeviceTarget(so.cuda.device);
        if (!target.ok()) return Fail(target.status());
        pm_opts.pipeline = passes::PipelineForTarget(target->ArchName(), target->sm_count);
      }
    }
    pm_opts.input_name = RunModel;
    so.compile = [pm_opts](ir::Module& m) -> absl::Status {
      auto pm = passes::PassManager::Create(pm_opts);
      if (!pm.ok()) return pm.status();
      return (*pm)->Run(m);
    };
    session = runtime::Session::Open(RunModel, so);
  }
  if (!session.ok()) return Fail(session.status());
  runtime::Session& s = **session;
  if (RunPrintIr) llvm::errs() << ir::ToText(s.module());
  llvm::errs() << absl::StrFormat("memra run: %s: %s, %d layers, n_vocab %d, context %d, %s, loaded in %.2f s\n",
                                  std::string(RunModel), s.module().attrs().GetString("arch").value_or("?"),
                                  s.module().attrs().I64Or("n_layer", 0), s.n_vocab(), s.context_length(),
                                  s.executor().Describe(), s.executor().load_seconds());

  std::vector<int32_t> prompt;
  if (!RunTokens.empty()) {
    auto ids = ParseIds(RunTokens);
    if (!ids.ok()) return Fail(ids.status());
    prompt = std::move(*ids);
  } else if (RunChat) {
    if (s.tokenizer() == nullptr) return Fail(s.tokenizer_status());
    auto chat = tokenizer::ChatTemplate::FromTokenizer(*s.tokenizer());
    if (!chat.ok()) return Fail(chat.status());
    tokenizer::ChatInputs in;
    in.messages = tokenizer::ChatInputs::Messages({{"user", std::string(RunPrompt)}});
    auto text = (*chat)->Apply(in);
    if (!text.ok()) return Fail(text.status());
    tokenizer::EncodeOptions eo;
    eo.add_special = false;
    prompt = s.tokenizer()->Encode(*text, eo);
    if (!RunNoEcho) llvm::outs() << *text;
  } else {
    auto ids = s.Tokenize(RunPrompt);
    if (!ids.ok()) return Fail(ids.status());
    prompt = std::move(*ids);
    if (!RunNoEcho) llvm::outs() << RunPrompt;
  }
  llvm::outs().flush();
  if (RunPrintIds) llvm::errs() << "prompt ids: " << absl::StrJoin(prompt, ",") << "\n";

  if (RunTrace) {
    s.executor().set_observer([](const ir::Value& v, const runtime::HostTensor& t) {
      if (t.dtype() != ir::DType::kF32 || !runtime::IsLayerTraceValue(v.name())) return;
      llvm::errs() << runtime::FormatTraceLine(v.name(), t.ShapeString(), runtime::ComputeChecksum(t.f32(), t.numel()))
                   << "\n";
    });
  }

  runtime::GenerationParams gp;
  gp.n_predict = RunN;
  gp.sampling.temperature = RunTemp;
  gp.sampling.top_k = RunTopK;
  gp.sampling.top_p = RunTopP;
  gp.seed = RunSeed;
  gp.stop_at_eog = !RunIgnoreEos;
  std::vector<float> prompt_logits;
  double first_token_seconds = -1;
  auto on_token = [&](int32_t id, absl::string_view text) {
    if (first_token_seconds < 0)
      first_token_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (RunTrace) s.executor().set_observer(nullptr);  // trace the prefill only
    llvm::outs() << llvm::StringRef(text.data(), text.size());
    llvm::outs().flush();
    return true;
  };
  auto stats = s.Generate(prompt, gp, on_token, so.prompt_logits ? &prompt_logits : nullptr);
  if (!stats.ok()) {
    llvm::outs() << "\n";
    return Fail(stats.status());
  }
  llvm::outs() << "\n";
  llvm::outs().flush();  // before the stats line on stderr
  if (!RunLogitsOut.empty()) {
    std::ofstream out(std::string(RunLogitsOut), std::ios::binary);
    out.write(reinterpret_cast<const char*>(prompt_logits.data()),
              static_cast<std::streamsize>(prompt_logits.size() * sizeof(float)));
    if (!out) return Fail(absl::PermissionDeniedError(absl::StrCat("cannot write ", std::string(RunLogitsOut))));
    llvm::errs() << absl::StrFormat("memra run: wrote %s (f32 [%d, %d])\n", std::string(RunLogitsOut), prompt.size(),
                                    s.n_vocab());
  }
  if (RunPrintIds) llvm::outs() << "generated ids: " << absl::StrJoin(stats->tokens, ",") << "\n";
  llvm::errs() << absl::StrFormat(
      "memra run: prompt %d tokens in %.3f s (%.1f tok/s); generation %d tokens, %d decode steps in "
      "%.3f s (%.1f tok/s)%s\n",
      stats->n_prompt, stats->prefill_seconds, stats->prefill_tokens_per_second(), stats->n_generated,
      stats->n_decode_calls, stats->decode_seconds, stats->decode_tokens_per_second(),
      stats->stopped_at_eog       ? "; stopped at end-of-generation"
      : stats->stopped_at_context ? "; context full"
                                  : "");
  if (first_token_seconds >= 0)
    llvm::errs() << absl::StrFormat("memra run: first token %.3f s after the start of memra run\n",
                                    first_token_seconds);
  if (runtime::CudaExecutor* cu = s.executor().cuda()) {
    const runtime::GraphStats& g = cu->graph_stats();
    llvm::errs() << absl::StrFormat(
        "memra run: cuda graphs %s: %d captured (%.1f ms), %d graph launches, %d eager segment runs%s; kernels: %s\n",
        so.cuda.cuda_graphs ? "on" : "off", g.captured, g.capture_ms, g.launches, g.eager_segments,
        g.capture_failures > 0 ? absl::StrCat(", ", g.capture_failures,
                                              " capture failures (ran eagerly; last: ", g.last_capture_failure, ")")
                               : std::string(),
        cu->compile_stats().ToString());
  }
  if (RunProfile) llvm::errs() << s.executor().ProfileReport();
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kRun, RunRun);
