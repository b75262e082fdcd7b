// `memra run MODEL.gguf`: tokenize, prefill (chunked), decode with sampling, stream the text.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
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
#include "ir/support/AtomicFile.h"
#include "llvm/Support/raw_ostream.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/BatchedSlots.h"
#include "runtime/Detokenizer.h"
#include "runtime/Scheduler.h"
#include "runtime/Session.h"
#include "runtime/StateMemory.h"
#include "runtime/cpu/LayerTrace.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Plan.h"
#include "tools/Command.h"
#include "tools/InteractiveChat.h"
#include "tools/Interrupt.h"
#include "tools/Options.h"
#include "tools/PassManagerFlags.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kRun(
    "run",
    "Generate text with a model (GGUF, compiled in memory, or a plan from memra compile) on the CPU or CUDA executor");
memra::tools::ModelArgument RunModelArg(kRun, "<model.gguf|model.plan>");
// GGUF: the compile pipeline (--passes, dumps, timing) runs before the executor is built.
memra::tools::PassManagerFlags RunPmFlags(kRun, memra::passes::kDefaultPipeline.data());
cl::opt<std::string> RunPlanGguf(
    "gguf", cl::desc("With a plan: the GGUF to take the weights from (default: the path the plan records)"),
    cl::init(""), cl::sub(kRun));
cl::opt<std::string> RunArch(
    "arch", cl::desc("With a plan: refuse it unless it targets this arch (default: any for the cpu backend)"),
    cl::init(""), cl::sub(kRun));

// The prompt.
cl::opt<std::string> RunPrompt("p",
                               cl::desc("Prompt text (tokenized with the model's tokenizer; BOS as the model says)"),
                               cl::init(""), cl::value_desc("text"), cl::sub(kRun));
cl::alias RunPromptLong("prompt", cl::desc("Alias for -p"), cl::NotHidden, cl::aliasopt(RunPrompt));
cl::opt<std::string> RunPromptFile("file", cl::desc("Read the prompt from this file (instead of -p)"), cl::init(""),
                                   cl::value_desc("path"), cl::sub(kRun));
cl::alias RunPromptFileLong("f", cl::desc("Alias for --file"), cl::NotHidden, cl::aliasopt(RunPromptFile));
cl::opt<std::string> RunTokens("tokens", cl::desc("Prompt as comma-separated token ids, e.g. 1,87,107 (instead of -p)"),
                               cl::init(""), cl::value_desc("ids"), cl::sub(kRun));
cl::opt<std::string> RunPromptsFile(
    "prompts-file",
    cl::desc("Run every line of this file as its own prompt, --parallel of them at a time through the scheduler "
             "(CPU), each output printed whole when it finishes, headed by its line number; blank lines skipped "
             "(default: off)"),
    cl::init(""), cl::value_desc("path"), cl::sub(kRun));
memra::tools::ChoiceOption RunDecodeClass("decode-class", {"bucket", "exact"}, memra::tools::kDecodeClassHelp,
                                          cl::init("bucket"), cl::sub(kRun));
memra::tools::IntOption<int> RunParallel("parallel", {1, 256},
                                         "With --prompts-file: prompts decoded at once (scheduler slots; each slot "
                                         "is a CPU session with its own -c context)",
                                         cl::init(1), cl::sub(kRun));
cl::alias RunParallelShort("np", cl::desc("Alias for --parallel"), cl::NotHidden, cl::aliasopt(RunParallel));
cl::opt<bool> RunChat("chat", cl::desc("Wrap -p as one user message with the model's chat template (default: false)"),
                      cl::init(false), cl::sub(kRun));
cl::opt<std::string> RunSystem("system-prompt",
                               cl::desc("System prompt for --chat and the interactive chat (default: none; the "
                                        "template's own default if it has one)"),
                               cl::init(""), cl::value_desc("text"), cl::sub(kRun));
cl::alias RunSystemLong("sys", cl::desc("Alias for --system-prompt"), cl::NotHidden, cl::aliasopt(RunSystem));
cl::opt<bool> RunConversation("cnv",
                              cl::desc("Interactive multi-turn chat with the model's chat template: one user turn "
                                       "per line of stdin, Ctrl-C stops a reply, Ctrl-D ends (default: false)"),
                              cl::init(false), cl::sub(kRun));
cl::alias RunConversationLong("conversation", cl::desc("Alias for -cnv"), cl::NotHidden, cl::aliasopt(RunConversation));
cl::alias RunInteractive("i", cl::desc("Alias for -cnv"), cl::NotHidden, cl::aliasopt(RunConversation));
cl::alias RunInteractiveLong("interactive", cl::desc("Alias for -cnv"), cl::NotHidden, cl::aliasopt(RunConversation));

// Generation and sampling (llama.cpp's names and defaults).
memra::tools::IntOption<int64_t> RunN("n-predict", {-1, memra::tools::kMaxContext},
                                      "New tokens to generate at most, -1 = until the context is full", cl::init(32),
                                      cl::sub(kRun));
cl::alias RunNLong("n", cl::desc("Alias for --n-predict"), cl::NotHidden, cl::aliasopt(RunN));
memra::tools::FloatOption RunTemp("temp", {0, 100}, "Sampling temperature; 0 = greedy (argmax)", cl::init(0.8f),
                                  cl::sub(kRun));
cl::alias RunTempLong("temperature", cl::desc("Alias for --temp"), cl::NotHidden, cl::aliasopt(RunTemp));
memra::tools::IntOption<int> RunTopK("top-k", {0, std::numeric_limits<int32_t>::max()},
                                     "Keep the k most likely tokens, 0 = all", cl::init(40), cl::sub(kRun));
memra::tools::FloatOption RunTopP("top-p", {0, 1},
                                  "Nucleus sampling: keep the most likely tokens up to this mass, "
                                  "1 = off",
                                  cl::init(0.95f), cl::sub(kRun));
memra::tools::FloatOption RunMinP("min-p", {0, 1},
                                  "Drop tokens less likely than this fraction of the most likely one, 0 = off",
                                  cl::init(0.05f), cl::sub(kRun));
memra::tools::FloatOption RunRepeatPenalty("repeat-penalty", {0, 100, /*lo_open=*/true},
                                           "Penalize the last --repeat-last-n tokens, 1 = off", cl::init(1.0f),
                                           cl::sub(kRun));
memra::tools::IntOption<int> RunRepeatLastN("repeat-last-n", {-1, memra::tools::kMaxContext},
                                            "Tokens the penalties look back on, 0 = off, -1 = the context",
                                            cl::init(64), cl::sub(kRun));
memra::tools::FloatOption RunPresencePenalty("presence-penalty", {-100, 100},
                                             "Subtracted from the logit of every recent token, 0 = off", cl::init(0.0f),
                                             cl::sub(kRun));
memra::tools::FloatOption RunFrequencyPenalty("frequency-penalty", {-100, 100},
                                              "Subtracted per occurrence of a recent token, 0 = off", cl::init(0.0f),
                                              cl::sub(kRun));
memra::tools::IntOption<int64_t> RunSeed("seed", {-1, std::numeric_limits<int64_t>::max()},
                                         "Sampling seed, -1 = random (printed, so the run can be repeated)",
                                         cl::init(-1), cl::sub(kRun));
cl::alias RunSeedLong("s", cl::desc("Alias for --seed"), cl::NotHidden, cl::aliasopt(RunSeed));
cl::opt<bool> RunIgnoreEos("ignore-eos", cl::desc("Do not stop at end-of-generation tokens (default: false)"),
                           cl::init(false), cl::sub(kRun));

// Context, batching and the executor.
memra::tools::IntOption<int64_t> RunCtx("ctx-size", {0, memra::tools::kMaxContext},
                                        "Context length (KV cache rows), 0 = the model's, capped at 4096", cl::init(0),
                                        cl::sub(kRun));
cl::alias RunCtxLong("c", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(RunCtx));
memra::tools::CacheTypeOptions RunCacheTypes(kRun);
memra::tools::MemoryBudgetOptions RunMemory(kRun);
memra::tools::IntOption<int64_t> RunChunk("batch-size", {0, memra::tools::kMaxContext},
                                          "Prefill chunk (batch) size in tokens, 0 = the whole prompt in one call",
                                          cl::init(512), cl::sub(kRun));
cl::alias RunChunkLong("b", cl::desc("Alias for --batch-size"), cl::NotHidden, cl::aliasopt(RunChunk));
cl::alias RunChunkOld("chunk", cl::desc("Alias for --batch-size"), cl::NotHidden, cl::aliasopt(RunChunk));
memra::tools::IntOption<int> RunThreads("threads", {0, memra::tools::HardwareThreads()},
                                        "CPU threads, 0 = all hardware threads", cl::init(0), cl::sub(kRun));
cl::alias RunThreadsLong("t", cl::desc("Alias for --threads"), cl::NotHidden, cl::aliasopt(RunThreads));
memra::tools::IntOption<int> RunTp(
    "tp", {1, 64},
    "Tensor-parallel ranks: the model's heads, channels and experts split over this many "
    "ranks (shard-tensor-parallel), one executor each, meeting in all_reduce / "
    "all_gather; on --backend cpu the ranks are threads of this process",
    cl::init(1), cl::sub(kRun));
memra::tools::ChoiceOption RunBackend("backend", {"cpu", "cuda"},
                                      "Executor; auto = cuda when a CUDA GPU is present, cpu otherwise", cl::init(""),
                                      cl::sub(kRun));
memra::tools::IntOption<int64_t> RunGpuLayers("n-gpu-layers", {-1, std::numeric_limits<int32_t>::max()},
                                              "Accepted for llama.cpp habits and ignored: with --backend cuda every "
                                              "layer runs on the GPU",
                                              cl::init(-1), cl::sub(kRun));
cl::alias RunGpuLayersLong("ngl", cl::desc("Alias for --n-gpu-layers"), cl::NotHidden, cl::aliasopt(RunGpuLayers));
cl::alias RunGpuLayersLong2("gpu-layers", cl::desc("Alias for --n-gpu-layers"), cl::NotHidden,
                            cl::aliasopt(RunGpuLayers));
cl::opt<bool> RunCudaSync(
    "cuda-sync-each-op", cl::desc("CUDA: synchronize after every op so an error names it (debugging) (default: false)"),
    cl::init(false), cl::sub(kRun));
cl::opt<bool> RunCudaGraphs("cuda-graphs",
                            cl::desc("CUDA: replay the compiled segments as CUDA graphs (captured on their "
                                     "second call); false = every op launched eagerly (default: true)"),
                            cl::init(true), cl::sub(kRun));
cl::opt<bool> RunPdl("pdl",
                     cl::desc("CUDA: programmatic dependent launch on sm_90+ (each kernel starts while the one before "
                              "it finishes); false = plain stream order (default: true)"),
                     cl::init(true), cl::sub(kRun));
cl::opt<std::string> RunInjectFault(
    "inject-fault",
    cl::desc("Testing: make the Nth CUDA device allocation (device-alloc:N) or NVRTC compile (nvrtc:N) fail, as a "
             "refusal by the driver or compiler would (default: none)"),
    cl::init(""), cl::value_desc("kind:N"), cl::sub(kRun));
memra::tools::IntOption<int64_t> RunDecodeChunk(
    "decode-chunk", {0, 4096},
    "Greedy decoding: decode steps per device loop call (CUDA: one graph launch per step, one sync per chunk); "
    "0 = the host picks every token from downloaded logits",
    cl::init(16), cl::sub(kRun));
memra::tools::ChoiceOption RunWeights("weights", {"blocks", "bf16", "per-row", "dequant"}, memra::tools::kWeightsHelp,
                                      cl::init(""), cl::sub(kRun));

// Output and debugging.
cl::opt<std::string> RunLogitsOut("logits-out",
                                  cl::desc("Write the f32 logits of every prompt position, row-major "
                                           "[n_prompt, n_vocab], to this file after prefill (default: off)"),
                                  cl::init(""), cl::value_desc("path"), cl::sub(kRun));
cl::opt<bool> RunPrintIds("print-token-ids",
                          cl::desc("Print the prompt and generated token ids to stdout after the text (default: "
                                   "false)"),
                          cl::init(false), cl::sub(kRun));
cl::opt<bool> RunTrace(
    "trace-layers",
    cl::desc("Print a checksum (sum, rms, absmax) of the embedding, every layer output "
             "(l_out-N), the final norm and the logits of each prefill call to stderr (default: false)"),
    cl::init(false), cl::sub(kRun));
cl::opt<bool> RunPrintIr("print-ir",
                         cl::desc("Print the lowered module (IR text) to stderr before running (default: false)"),
                         cl::init(false), cl::sub(kRun));
cl::opt<bool> RunProfile("profile", cl::desc("Print time per op kind of each function at the end (default: false)"),
                         cl::init(false), cl::sub(kRun));
cl::opt<bool> RunNoEcho("no-echo", cl::desc("Do not print the prompt text before the generation (default: false)"),
                        cl::init(false), cl::sub(kRun));
cl::alias RunNoEchoLlama("no-display-prompt", cl::desc("Alias for --no-echo"), cl::NotHidden, cl::aliasopt(RunNoEcho));

int Fail(const absl::Status& st) {
  llvm::errs() << "memra run: " << st.ToString() << "\n";
  return 1;
}

absl::StatusOr<std::vector<int32_t>> ParseIds(absl::string_view s) {
  std::vector<int32_t> ids;
  if (absl::StripAsciiWhitespace(s).empty()) return absl::InvalidArgumentError("--tokens: no token ids");
  int position = 0;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    ++position;
    int32_t v;
    if (absl::StripAsciiWhitespace(part).empty())
      return absl::InvalidArgumentError(absl::StrCat("--tokens: entry ", position, " is empty (\"", s, "\")"));
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v))
      return absl::InvalidArgumentError(absl::StrCat("--tokens: \"", part, "\" is not an integer token id"));
    ids.push_back(v);
  }
  return ids;
}

// stdout and stderr share a terminal: an stderr line never lands in the middle of the text.
class Console {
 public:
  void Text(absl::string_view t) {
    if (t.empty()) return;
    llvm::outs() << llvm::StringRef(t.data(), t.size());
    llvm::outs().flush();
    mid_line_ = t.back() != '\n';
  }
  // Ends the stdout line (if one is open) before something goes to stderr.
  llvm::raw_ostream& Err() {
    EndLine();
    return llvm::errs();
  }
  void EndLine() {
    if (mid_line_) Text("\n");
  }

 private:
  bool mid_line_ = false;
};

absl::StatusOr<std::string> ReadPromptFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return absl::InvalidArgumentError(absl::StrCat("-f ", path, ": is a directory, not a prompt file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("-f ", path, ": cannot open the prompt file"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// --prompts-file: one prompt per non-blank line, with its 1-based line number.
struct PromptLine {
  int64_t line = 0;
  std::string text;
};

absl::StatusOr<std::vector<PromptLine>> ReadPromptsFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return absl::InvalidArgumentError(absl::StrCat("--prompts-file ", path, ": is a directory, not a file of prompts"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--prompts-file ", path, ": cannot open the prompts file"));
  std::vector<PromptLine> prompts;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    prompts.push_back({n, line});
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("--prompts-file ", path, ": cannot read the prompts file"));
  if (prompts.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("--prompts-file ", path, ": no prompts (",
                     n == 0 ? std::string("the file is empty") : absl::StrCat("its ", n, " lines are all blank"), ")"));
  return prompts;
}

// The flags --prompts-file cannot be combined with (one prompt, a chat, per-prompt dumps).
absl::Status CheckPromptsFileFlags() {
  struct Conflict {
    bool given;
    const char* name;
    const char* why;
  };
  const Conflict conflicts[] = {
      {RunPrompt.getNumOccurrences() > 0, "-p/--prompt", "each line of the file is a prompt"},
      {RunPromptFile.getNumOccurrences() > 0, "-f/--file", "each line of the file is a prompt"},
      {RunTokens.getNumOccurrences() > 0, "--tokens", "each line of the file is a prompt"},
      {RunConversation.getNumOccurrences() > 0, "-cnv/--conversation/-i", "the interactive chat is one sequence"},
      {RunChat.getNumOccurrences() > 0, "--chat", "the prompts go to the model as plain text"},
      {RunSystem.getNumOccurrences() > 0, "-sys/--system-prompt", "the prompts go to the model as plain text"},
      {RunLogitsOut.getNumOccurrences() > 0, "--logits-out", "it writes one prompt's logits"},
      {RunTrace.getNumOccurrences() > 0, "--trace-layers", "it traces one prompt's prefill"},
      {RunProfile.getNumOccurrences() > 0, "--profile", "it profiles one session"},
  };
  for (const Conflict& c : conflicts)
    if (c.given)
      return absl::InvalidArgumentError(
          absl::StrCat("--prompts-file and ", c.name, " cannot be used together (", c.why, ")"));
  if (RunN == 0)
    return absl::InvalidArgumentError(
        "-n 0 with --prompts-file: each prompt generates at least one token (give -n 1 or more, or -1)");
  if (RunPmFlags.any_given())
    return absl::InvalidArgumentError(
        "--prompts-file and --passes / the pass dumps cannot be used together (the batched engine compiles its own "
        "@step pipeline)");
  return absl::OkStatus();
}

// The sampler chain of the flags (-1 for --repeat-last-n = `ctx`).
memra::kernels::cpu::SamplingParams SamplingFromFlags(int64_t ctx) {
  memra::kernels::cpu::SamplingParams sp;
  sp.temperature = RunTemp;
  sp.top_k = RunTopK;
  sp.top_p = RunTopP;
  sp.min_p = RunMinP;
  sp.repeat_penalty = RunRepeatPenalty;
  sp.repeat_last_n = RunRepeatLastN < 0 ? static_cast<int>(ctx) : int(RunRepeatLastN);
  sp.presence_penalty = RunPresencePenalty;
  sp.frequency_penalty = RunFrequencyPenalty;
  return sp;
}

// `memra run MODEL --prompts-file F --parallel N`: every prompt a Scheduler request on the batched
// engine (runtime/BatchedSlots.h: min(N, prompts) slots, one @step per scheduler step, CPU or
// CUDA), seeded seed + line number so the tokens do not
// depend on N; each output printed whole when its request finishes (completion order):
//   [line 3] <prompt>
//   <generated text>
//   prompt ids: ...       (--print-token-ids)
//   generated ids: ...
int RunPromptsFileMode(const std::string& model_path, const memra::runtime::SessionOptions& so,
                       const std::vector<PromptLine>& prompts, Console& console) {
  using namespace memra;
  using Clock = std::chrono::steady_clock;
  const int slots = static_cast<int>(std::min<int64_t>(RunParallel, static_cast<int64_t>(prompts.size())));
  runtime::BatchedSlotsOptions bo;
  bo.slots = slots;
  bo.tp = RunTp;
  bo.n_ctx = so.n_ctx;
  bo.cache_types = so.cache_types;
  bo.backend = so.backend;
  bo.exec.cpu.threads = so.threads;
  bo.exec.cpu.weight_mode = so.weight_mode;
  bo.exec.cpu.memory_budget = so.host_memory_budget;
  bo.exec.cuda = so.cuda;
  {
    auto decode_class = memra::kernels::cuda::ParseDecodeClass(RunDecodeClass);
    if (!decode_class.ok()) return Fail(decode_class.status());
    bo.decode_class = *decode_class;
  }
  const auto t_load = Clock::now();
  auto backend = runtime::BatchedSlots::Open(model_path, bo);
  if (!backend.ok()) return Fail(backend.status());
  const double load_seconds = std::chrono::duration<double>(Clock::now() - t_load).count();
  runtime::BatchedSlots& engine = **backend;
  const ir::Module& module = engine.module();
  if (RunPrintIr) llvm::errs() << ir::ToText(module);
  if (engine.tokenizer() == nullptr)
    return Fail(absl::FailedPreconditionError(
        "--prompts-file needs the model's tokenizer (the prompts are text), and the GGUF has none usable"));
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  const int64_t ctx = engine.ctx_per_slot();
  auto state = runtime::StateBytesOf(module);
  llvm::errs() << absl::StrFormat(
      "memra run: %s: %s, %d layers, n_vocab %d, %d slots (--parallel %d) of context %d each, %d KV blocks of %d "
      "(%s in all), %s, loaded in %.2f s\n",
      model_path, module.attrs().GetString("arch").value_or("?"), module.attrs().I64Or("n_layer", 0), engine.n_vocab(),
      slots, int(RunParallel), ctx, engine.kv_blocks(), module.attrs().I64Or("kv_block", 0),
      state.ok() ? runtime::DescribeStateBytes(*state) : "state size unknown", engine.executor().Describe(),
      load_seconds);

  uint64_t seed = 0;
  if (RunSeed >= 0) {
    seed = static_cast<uint64_t>(int64_t(RunSeed));
  } else {
    seed = std::random_device{}() & 0x7fffffff;
    if (RunTemp > 0)
      llvm::errs() << absl::StrFormat(
          "memra run: seed %d (sampling at temperature %g; each prompt seeded seed + its line number; repeat with "
          "-s %d)\n",
          seed, float(RunTemp), seed);
  }

  runtime::SchedulerOptions opts;
  opts.step_tokens =
      std::max<int64_t>(std::min<int64_t>(RunChunk > 0 ? int64_t(RunChunk) : 512, engine.max_step_rows()),
                        runtime::MinStepTokens(slots, opts.prefill_align));
  opts.detokenizer = runtime::TokenizerDetokenizer(tok);
  auto sched = runtime::Scheduler::Create(**backend, opts);
  if (!sched.ok()) return Fail(sched.status());

  struct Output {
    std::vector<int32_t> prompt, ids;
    std::string text;
    bool done = false;
  };
  std::vector<Output> outs(prompts.size());
  std::vector<runtime::RequestId> request_ids;
  int64_t prompt_tokens = 0, generated = 0, errors = 0, cancelled = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> ids = tok.Encode(prompts[i].text);
    outs[i].prompt = ids;
    runtime::Request r;
    r.prompt = std::move(ids);
    r.sampling = SamplingFromFlags(ctx);
    r.seed = seed + static_cast<uint64_t>(prompts[i].line);
    r.max_tokens = RunN < 0 ? ctx : int64_t(RunN);
    if (!RunIgnoreEos) r.stop_ids = tok.eog_ids();
    auto sink = [&, i](const runtime::TokenEvent& e) {
      Output& o = outs[i];
      if (e.token >= 0) o.ids.push_back(e.token);
      o.text += e.text;
      if (!e.last) return;
      o.done = true;
      prompt_tokens += e.usage.prompt_tokens;
      generated += e.usage.completion_tokens;
      std::string block = absl::StrCat("[line ", prompts[i].line, "]");
      if (!RunNoEcho) absl::StrAppend(&block, " ", prompts[i].text);
      absl::StrAppend(&block, "\n", o.text);
      if (o.text.empty() || o.text.back() != '\n') block += "\n";
      if (RunPrintIds)
        absl::StrAppend(&block, "prompt ids: ", absl::StrJoin(o.prompt, ","), "\n",
                        "generated ids: ", absl::StrJoin(o.ids, ","), "\n");
      console.Text(block);
      if (e.reason == runtime::FinishReason::kError) {
        ++errors;
        console.Err() << "memra run: line " << prompts[i].line << ": " << e.error.ToString() << "\n";
      } else if (e.reason == runtime::FinishReason::kCancelled) {
        ++cancelled;
      }
    };
    auto id = (*sched)->Submit(std::move(r), sink);
    if (!id.ok())
      return Fail(
          absl::Status(id.status().code(), absl::StrCat("--prompts-file ", std::string(RunPromptsFile), " line ",
                                                        prompts[i].line, ": ", id.status().message())));
    request_ids.push_back(*id);
  }

  memra::tools::InterruptGuard interrupt;  // Ctrl-C cancels what is left and prints the summary
  const auto t0 = Clock::now();
  bool interrupted = false;
  while (!(*sched)->idle()) {
    if (interrupt.flag().load()) {
      interrupted = true;
      for (size_t i = 0; i < outs.size(); ++i)
        if (!outs[i].done) (*sched)->Cancel(request_ids[i]).IgnoreError();
      break;
    }
    if (absl::Status st = (*sched)->Step(); !st.ok()) {
      console.EndLine();
      return Fail(st);
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const runtime::SchedulerStats ss = (*sched)->stats();
  llvm::errs() << absl::StrFormat(
      "memra run: %d prompts (lines %d to %d of %s), %d prompt tokens, %d generated tokens in %.3f s: %.1f tok/s "
      "generation, %.1f tok/s prompt + generation (all prompts together); --parallel %d, %d slots, %d steps%s%s\n",
      prompts.size(), prompts.front().line, prompts.back().line, std::string(RunPromptsFile), prompt_tokens, generated,
      wall, wall > 0 ? generated / wall : 0.0, wall > 0 ? (prompt_tokens + generated) / wall : 0.0, int(RunParallel),
      slots, ss.steps, errors > 0 ? absl::StrCat("; ", errors, " failed") : std::string(),
      interrupted ? absl::StrCat("; interrupted (Ctrl-C): ", cancelled, " cancelled") : std::string());
  return errors > 0 ? 1 : 0;
}

int RunRun() {
  using namespace memra;
  const auto start = std::chrono::steady_clock::now();  // time to first token counts from here
  Console console;
  std::string model_path, model_error;
  if (!RunModelArg.Resolve(model_path, model_error)) return Fail(absl::InvalidArgumentError(model_error));
  const bool prompts_file = RunPromptsFile.getNumOccurrences() > 0;
  std::vector<PromptLine> prompts;
  if (prompts_file) {
    if (absl::Status st = CheckPromptsFileFlags(); !st.ok()) return Fail(st);
    if (runtime::IsPlanFile(model_path))
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--prompts-file: ", model_path, " is a plan; --prompts-file runs a GGUF for now (give the model's .gguf)")));
    auto lines = ReadPromptsFile(RunPromptsFile);
    if (!lines.ok()) return Fail(lines.status());
    prompts = std::move(*lines);
  } else if (RunParallel.getNumOccurrences() > 0) {
    return Fail(absl::InvalidArgumentError(
        "--parallel needs --prompts-file (it runs that file's prompts N at a time; one prompt runs alone)"));
  }

  runtime::Backend backend = runtime::Backend::kCpu;
  {
    // Before the model is read: a clear error, not a long load first.
    auto b = tools::BackendFromFlag(RunBackend);
    if (!b.ok()) return Fail(b.status());
    backend = *b;
  }
  const int prompt_sources = !RunPrompt.empty() + !RunTokens.empty() + !RunPromptFile.empty();
  if (prompt_sources > 1) return Fail(absl::InvalidArgumentError("give one of -p TEXT, -f FILE or --tokens IDS"));
  if (prompt_sources == 0 && !RunConversation && !prompts_file)
    return Fail(absl::InvalidArgumentError("no prompt: give -p TEXT, -f FILE or --tokens IDS (or -cnv to chat)"));
  if (RunConversation && !RunTokens.empty())
    return Fail(absl::InvalidArgumentError("-cnv takes text (-p or -f), not --tokens"));
  if (RunChat && !RunTokens.empty())
    return Fail(absl::InvalidArgumentError("--chat takes text (-p or -f), not --tokens"));
  if (!RunSystem.empty() && !RunChat && !RunConversation)
    return Fail(
        absl::InvalidArgumentError("-sys needs --chat or -cnv (the system prompt goes through the chat template)"));
  // --tokens checked before the model loads (its ids against the vocabulary after).
  if (!RunTokens.empty())
    if (auto ids = ParseIds(RunTokens); !ids.ok()) return Fail(ids.status());
  std::string prompt_text = RunPrompt;
  if (!RunPromptFile.empty()) {
    auto text = ReadPromptFile(RunPromptFile);
    if (!text.ok()) return Fail(text.status());
    prompt_text = std::move(*text);
  }
  if (RunGpuLayers.getNumOccurrences() > 0)
    llvm::errs() << "memra run: -ngl ignored: with --backend cuda every layer runs on the GPU\n";

  runtime::SessionOptions so;
  so.threads = RunThreads;
  so.n_ctx = RunCtx;
  so.cache_types = RunCacheTypes.Types();
  so.chunk = RunChunk;
  so.prompt_logits = !RunLogitsOut.empty();
  so.profile = RunProfile;
  so.backend = backend;
  so.cuda.sync_each_op = RunCudaSync;
  so.cuda.cuda_graphs = RunCudaGraphs;
  so.cuda.pdl = RunPdl;
  so.host_memory_budget = RunMemory.host_bytes();
  so.cuda.memory_budget = RunMemory.device_bytes();
  if (!RunInjectFault.empty()) {
    const std::string spec = RunInjectFault;
    const size_t colon = spec.find(':');
    const std::string kind = spec.substr(0, colon);
    int n = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(spec.substr(colon + 1), &n) || n < 1 ||
        (kind != "device-alloc" && kind != "nvrtc"))
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--inject-fault=", spec, ": expected device-alloc:N or nvrtc:N with N >= 1")));
    if (backend != runtime::Backend::kCuda)
      return Fail(absl::InvalidArgumentError("--inject-fault applies to --backend cuda"));
    (kind == "nvrtc" ? so.cuda.fail_compile : so.cuda.fail_device_alloc) = n;
  }
  so.decode_chunk = RunDecodeChunk;
  so.cuda.progress = false;
  std::string weights_error;
  const std::string weights = memra::tools::WeightsForBackend(RunWeights, runtime::BackendName(backend), weights_error);
  if (!weights_error.empty()) return Fail(absl::InvalidArgumentError(weights_error));
  so.weight_mode = weights == "dequant" ? runtime::WeightMode::kDequantizeAtLoad : runtime::WeightMode::kPerRow;
  so.cuda.weights = weights == "bf16" ? kernels::cuda::WeightMode::kBf16 : kernels::cuda::WeightMode::kBlocks;

  absl::StatusOr<std::unique_ptr<runtime::Session>> session;
  if (runtime::IsPlanFile(model_path)) {
    // A plan fixes its context, pipeline and prefill buckets: a flag that would change them is an
    // error, not silently ignored.
    if (RunCtx.getNumOccurrences() > 0)
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "-c/--ctx-size: ", model_path, " is a plan, and a plan fixes its context; compile it with --ctx-size")));
    if (RunCacheTypes.any_given())
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("-ctk/-ctv: ", model_path,
                       " is a plan, and a plan fixes its KV cache types; compile it with --cache-type-k/-v")));
    if (RunPmFlags.any_given())
      return Fail(absl::InvalidArgumentError(absl::StrCat("--passes and the pass dumps apply when compiling; ",
                                                          model_path, " is a plan (compiled already)")));
    // A plan: check it against its GGUF (and --arch) before anything else, then run its IR.
    auto plan = runtime::ReadPlan(model_path);
    if (!plan.ok()) return Fail(plan.status());
    auto file = gguf::GgufFile::Open(RunPlanGguf.empty() ? plan->gguf.path : std::string(RunPlanGguf));
    if (!file.ok()) return Fail(file.status());
    if (absl::Status st = runtime::CheckPlanCompatible(*plan, runtime::IdentifyGguf(**file), RunArch); !st.ok())
      return Fail(absl::Status(st.code(), absl::StrCat(model_path, ": ", st.message())));
    if (backend == runtime::Backend::kCuda && !plan->target.empty()) {
      auto device = runtime::CudaDeviceTarget(so.cuda.device);
      if (!device.ok()) return Fail(device.status());
      if (absl::Status st = runtime::CheckPlanTarget(*plan, *device); !st.ok())
        return Fail(absl::Status(st.code(), absl::StrCat(model_path, ": ", st.message())));
    }
    auto module = runtime::LoadPlanModule(*plan);
    if (!module.ok()) return Fail(module.status());
    if (const int64_t plan_tp = (*module)->attrs().I64Or("tp", 1); RunTp.getNumOccurrences() > 0 && RunTp != plan_tp)
      return Fail(
          absl::InvalidArgumentError(absl::StrCat("--tp ", int(RunTp), ": ", model_path, " is a plan compiled for ",
                                                  plan_tp, " ranks; compile it with --tp ", int(RunTp))));
    if (backend == runtime::Backend::kCuda) {
      // The plan fixes how its block formats are held (its kernels were selected for it).
      auto planned = runtime::PlanWeights(*plan);
      if (!planned.ok()) return Fail(planned.status());
      if (*planned) {
        if (RunWeights.getNumOccurrences() > 0 && *planned != so.cuda.weights)
          return Fail(absl::InvalidArgumentError(absl::StrCat(
              "--weights ", std::string(RunWeights), ": ", model_path, " is a plan compiled with --weights ",
              kernels::cuda::WeightModeName(**planned), "; recompile it with --weights ", std::string(RunWeights))));
        so.cuda.weights = **planned;
      }
      // The plan's cubins: nothing is compiled at run time (a kernel missing from the table would
      // still compile, counted in the kernel line).
      auto pre = runtime::PrecompiledKernels(*plan);
      if (!pre.ok())
        return Fail(absl::Status(pre.status().code(), absl::StrCat(model_path, ": ", pre.status().message())));
      so.cuda.precompiled = *pre;
    }
    session = runtime::Session::Open(std::move(*file), std::move(*module), so);
  } else {
    if (!RunPlanGguf.empty() || !RunArch.empty())
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--gguf and --arch apply to a plan; ", model_path, " is not a plan (*.plan)")));
    passes::PassManagerOptions pm_opts = RunPmFlags.Options();
    // The backend's pipeline (CUDA: with select-kernels) unless --passes says otherwise.
    if (!RunPmFlags.pipeline_given()) {
      pm_opts.pipeline = passes::PipelineForArch("cpu");
      if (backend == runtime::Backend::kCuda) {  // selected for this GPU (kernels/cuda/Target.h)
        auto target = runtime::CudaDeviceTarget(so.cuda.device);
        if (!target.ok()) return Fail(target.status());
        pm_opts.pipeline = passes::PipelineForTarget(target->ArchName(), target->sm_count, weights);
      }
    }
    pm_opts.pipeline = passes::WithTensorParallel(pm_opts.pipeline, RunTp);
    pm_opts.input_name = model_path;
    so.compile = [pm_opts](ir::Module& m) -> absl::Status {
      auto pm = passes::PassManager::Create(pm_opts);
      if (!pm.ok()) return pm.status();
      return (*pm)->Run(m);
    };
    if (prompts_file) return RunPromptsFileMode(model_path, so, prompts, console);
    session = runtime::Session::Open(model_path, so);
  }
  if (!session.ok()) return Fail(session.status());
  runtime::Session& s = **session;
  if (RunPrintIr) llvm::errs() << ir::ToText(s.module());
  auto state = runtime::StateBytesOf(s.module());
  llvm::errs() << absl::StrFormat("memra run: %s: %s, %d layers, n_vocab %d, context %d (%s), %s, loaded in %.2f s\n",
                                  model_path, s.module().attrs().GetString("arch").value_or("?"),
                                  s.module().attrs().I64Or("n_layer", 0), s.n_vocab(), s.context_length(),
                                  state.ok() ? absl::StrCat(runtime::DescribeStateBytes(*state),
                                                            s.module().attrs().I64Or("tp", 1) > 1 ? " a rank" : "")
                                             : "state size unknown",
                                  s.executor().Describe(), s.executor().load_seconds());

  runtime::GenerationParams gp;
  gp.n_predict = RunN < 0 ? s.context_length() : int64_t(RunN);
  gp.sampling.temperature = RunTemp;
  gp.sampling.top_k = RunTopK;
  gp.sampling.top_p = RunTopP;
  gp.sampling.min_p = RunMinP;
  gp.sampling.repeat_penalty = RunRepeatPenalty;
  gp.sampling.repeat_last_n = RunRepeatLastN < 0 ? static_cast<int>(s.context_length()) : int(RunRepeatLastN);
  gp.sampling.presence_penalty = RunPresencePenalty;
  gp.sampling.frequency_penalty = RunFrequencyPenalty;
  gp.stop_at_eog = !RunIgnoreEos;
  if (RunSeed >= 0) {
    gp.seed = static_cast<uint64_t>(int64_t(RunSeed));
  } else {
    gp.seed = std::random_device{}() & 0x7fffffff;
    if (RunTemp > 0)
      llvm::errs() << absl::StrFormat("memra run: seed %d (sampling at temperature %g; repeat with -s %d)\n", gp.seed,
                                      float(RunTemp), gp.seed);
  }
  memra::tools::InterruptGuard interrupt;  // Ctrl-C stops the generation and prints the timings so far

  if (RunConversation) {
    memra::tools::ChatLoopOptions co;
    co.system_prompt = RunSystem;
    co.first_message = prompt_text;
    co.gen = gp;
    co.interrupted = &interrupt.flag();
    co.echo_prompt_marker = true;
    co.on_turn = [&interrupt](const memra::tools::ChatTurn& t) {
      if (!t.interrupted) return;
      llvm::errs() << absl::StrFormat("memra run: reply %d stopped (Ctrl-C) after %d tokens in %.3f s\n", t.turn,
                                      t.stats.n_generated, t.stats.decode_seconds);
      interrupt.Rearm();  // LLVM's handler ran the interrupt function once: install it again
    };
    if (absl::Status st = memra::tools::RunInteractiveChat(s, co, std::cin, llvm::outs(), llvm::errs()); !st.ok())
      return Fail(st);
    return 0;
  }

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
    in.messages = RunSystem.empty()
                      ? tokenizer::ChatInputs::Messages({{"user", prompt_text}})
                      : tokenizer::ChatInputs::Messages({{"system", std::string(RunSystem)}, {"user", prompt_text}});
    auto rendered = (*chat)->Render(in);
    if (!rendered.ok()) return Fail(rendered.status());
    prompt = s.tokenizer()->Encode(rendered->text, rendered->EncodeOptions());
    if (absl::Status st = s.CheckPrompt(prompt); !st.ok()) return Fail(st);  // before the echo
    if (!RunNoEcho) console.Text(rendered->text);
  } else {
    auto ids = s.Tokenize(prompt_text);
    if (!ids.ok()) return Fail(ids.status());
    prompt = std::move(*ids);
    if (absl::Status st = s.CheckPrompt(prompt); !st.ok()) return Fail(st);  // before the echo
    if (!RunNoEcho) console.Text(prompt_text);
  }

  if (RunTrace) {
    s.executor().set_observer([&console](const ir::Value& v, const runtime::HostTensor& t) {
      if (t.dtype() != ir::DType::kF32 || !runtime::IsLayerTraceValue(v.name())) return;
      console.Err() << runtime::FormatTraceLine(v.name(), t.ShapeString(), runtime::ComputeChecksum(t.f32(), t.numel()))
                    << "\n";
    });
  }

  std::vector<float> prompt_logits;
  double first_token_seconds = -1;
  auto on_token = [&](int32_t id, absl::string_view text) {
    if (first_token_seconds < 0)
      first_token_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (RunTrace) s.executor().set_observer(nullptr);  // trace the prefill only
    console.Text(text);
    return !interrupt.flag().load();
  };
  auto stats = s.Generate(prompt, gp, on_token, so.prompt_logits ? &prompt_logits : nullptr);
  console.EndLine();
  if (!stats.ok()) return Fail(stats.status());
  if (!RunLogitsOut.empty()) {
    auto out = memra::AtomicFile::Create(RunLogitsOut);
    if (!out.ok()) return Fail(out.status());
    if (absl::Status st = (*out)->Write(prompt_logits.data(), prompt_logits.size() * sizeof(float)); !st.ok())
      return Fail(st);
    if (absl::Status st = (*out)->Commit(); !st.ok()) return Fail(st);
    llvm::errs() << absl::StrFormat("memra run: wrote %s (f32 [%d, %d])\n", std::string(RunLogitsOut), prompt.size(),
                                    s.n_vocab());
  }
  if (RunPrintIds) {
    console.Text(absl::StrCat("prompt ids: ", absl::StrJoin(prompt, ","), "\n"));
    console.Text(absl::StrCat("generated ids: ", absl::StrJoin(stats->tokens, ","), "\n"));
  }
  llvm::errs() << absl::StrFormat(
      "memra run: prompt %d tokens in %.3f s (%.1f tok/s); generation %d tokens, %d decode steps in "
      "%.3f s (%.1f tok/s)%s\n",
      stats->n_prompt, stats->prefill_seconds, stats->prefill_tokens_per_second(), stats->n_generated,
      stats->n_decode_calls, stats->decode_seconds, stats->decode_tokens_per_second(),
      interrupt.flag().load()     ? "; interrupted (Ctrl-C)"
      : stats->stopped_at_eog     ? "; stopped at end-of-generation"
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
