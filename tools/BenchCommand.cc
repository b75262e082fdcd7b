// `memra bench`: prefill (pp) and decode (tg) throughput in llama-bench's layouts (-o md, json,
// jsonl, csv; tools/BenchReport.h), so the two tools' outputs sit side by side. Random token ids;
// each repetition starts from an empty state (decode at depth d first prefills d tokens, untimed).
// --batch B1,B2,...: llama-batched-bench's table instead, measured through the Scheduler on the
// batched engine (runtime/BatchedSlots.h; RunBatchBench below), CPU or CUDA.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/ModelSummary.h"
#include "ir/DType.h"
#include "ir/StatusMacros.h"
#include "kernels/cpu/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/BatchedSlots.h"
#include "runtime/Executor.h"
#include "runtime/Scheduler.h"
#include "runtime/cuda/CudaExecutor.h"
#include "tools/BenchReport.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kBench("bench", "Prefill / decode throughput (llama-bench's table layout)");
memra::tools::ModelArgument BenchModelArg(kBench, "<model.gguf>");
memra::tools::IntListOption BenchP("n-prompt", {0, memra::tools::kMaxContext},
                                   "Prompt lengths to prefill (pp tests), comma-separated, 0 = none", cl::init("512"),
                                   cl::sub(kBench));
cl::alias BenchPShort("p", cl::desc("Alias for --n-prompt"), cl::NotHidden, cl::aliasopt(BenchP));
memra::tools::CacheTypeOptions BenchCacheTypes(kBench);
memra::tools::MemoryBudgetOptions BenchMemory(kBench);
memra::tools::IntOption<int64_t> BenchN("n-gen", {0, memra::tools::kMaxContext}, "Tokens to decode (tg test), 0 = none",
                                        cl::init(128), cl::sub(kBench));
cl::alias BenchNShort("n", cl::desc("Alias for --n-gen"), cl::NotHidden, cl::aliasopt(BenchN));
memra::tools::IntListOption BenchD("n-depth", {0, memra::tools::kMaxContext},
                                   "KV depths for the tg test, comma-separated", cl::init("0"), cl::sub(kBench));
cl::alias BenchDShort("d", cl::desc("Alias for --n-depth"), cl::NotHidden, cl::aliasopt(BenchD));
memra::tools::IntOption<int> BenchR("repetitions", {1, 1000}, "Repetitions of each test", cl::init(3), cl::sub(kBench));
cl::alias BenchRShort("r", cl::desc("Alias for --repetitions"), cl::NotHidden, cl::aliasopt(BenchR));
memra::tools::ChoiceOption BenchOut("output", {"md", "json", "jsonl", "csv"}, "Output format (llama-bench's)",
                                    cl::init("md"), cl::sub(kBench));
cl::alias BenchOutShort("o", cl::desc("Alias for --output"), cl::NotHidden, cl::aliasopt(BenchOut));
memra::tools::ChoiceOption BenchBackend("backend", {"cpu", "cuda"}, "Executor; auto = cuda when a GPU is present",
                                        cl::init(""), cl::sub(kBench));
cl::opt<std::string> BenchCache("kernel-cache",
                                cl::desc("Kernel cubin cache folder, - = none (default: ~/.cache/memra)"), cl::init(""),
                                cl::value_desc("dir"), cl::sub(kBench));
cl::opt<bool> BenchProfile(
    "profile",
    cl::desc("Time per op kind of each test (events around every op); with --batch, of the batched "
             "engine over every step (default: false)"),
    cl::init(false), cl::sub(kBench));
cl::list<std::string> BenchProfileSkip(
    "profile-skip",
    cl::desc("CUDA, timing only: run no device work for these ops (op mnemonic, unit, kernel entry or "
             "a weight the op reads, with or without its blk.N. prefix; comma-separated, e.g. "
             "delta_net_step,gemv_swiglu,output.weight), so the difference in t/s against a run without it "
             "is what they cost inside the CUDA graph; the outputs are garbage (default: none)"),
    cl::CommaSeparated, cl::value_desc("names"), cl::sub(kBench));
cl::opt<bool> BenchGraphs("cuda-graphs",
                          cl::desc("CUDA: replay captured segments as CUDA graphs; false = all eager (default: true)"),
                          cl::init(true), cl::sub(kBench));
cl::opt<bool> BenchPdl("pdl",
                       cl::desc("CUDA: programmatic dependent launch on sm_90+ (each kernel starts while the one "
                                "before it finishes); false = plain stream order (default: true)"),
                       cl::init(true), cl::sub(kBench));
cl::opt<std::string> BenchPasses("passes",
                                 cl::desc("Compile pipeline run before the benchmark (default: memra run's for the "
                                          "backend, passes/Pipelines.h PipelineForArch)"),
                                 cl::init(""), cl::value_desc("pipeline"), cl::sub(kBench));
memra::tools::ChoiceOption BenchWeights("weights", {"blocks", "bf16", "per-row", "dequant"}, memra::tools::kWeightsHelp,
                                        cl::init(""), cl::sub(kBench));
memra::tools::IntListOption BenchTp("tp", {1, 64},
                                    "Tensor-parallel ranks the model is split over (as memra run --tp), "
                                    "comma-separated: each value's tests, then (several values) their scaling "
                                    "against the first; --batch takes one value",
                                    cl::init("1"), cl::sub(kBench));
memra::tools::IntOption<int> BenchThreads("threads", {0, memra::tools::HardwareThreads()},
                                          "CPU threads for the cpu backend, 0 = all hardware threads", cl::init(0),
                                          cl::sub(kBench));
cl::alias BenchThreadsLong("t", cl::desc("Alias for --threads"), cl::NotHidden, cl::aliasopt(BenchThreads));
// llama-bench command lines run unchanged: these are accepted and noted.
memra::tools::IntListOption BenchGpuLayers("n-gpu-layers", {-1, std::numeric_limits<int32_t>::max()},
                                           "Accepted for llama-bench habits and ignored: with --backend cuda every "
                                           "layer runs on the GPU",
                                           cl::init("99"), cl::sub(kBench));
cl::alias BenchGpuLayersLong("ngl", cl::desc("Alias for --n-gpu-layers"), cl::NotHidden, cl::aliasopt(BenchGpuLayers));
memra::tools::IntListOption BenchFlashAttn("flash-attn", {0, 1},
                                           "Accepted for llama-bench habits and ignored: memra always runs its own "
                                           "fused attention",
                                           cl::init("1"), cl::sub(kBench));
cl::alias BenchFlashAttnLong("fa", cl::desc("Alias for --flash-attn"), cl::NotHidden, cl::aliasopt(BenchFlashAttn));

memra::tools::ChoiceOption BenchDecodeClass("decode-class", {"bucket", "exact"}, memra::tools::kDecodeClassHelp,
                                            cl::init("bucket"), cl::sub(kBench));
memra::tools::IntListOption BenchBatch(
    "batch", {1, 256},
    "Concurrent requests per test, comma-separated: llama-batched-bench's table (PP, TG, B, N_KV, times and "
    "tok/s) for every -p and B, each request -p random prompt tokens then -n decode steps (greedy unless --temp), "
    "through the scheduler on the batched engine, then the TTFT of one more request alone and beside B decoding; "
    "none = llama-bench's pp / tg tests",
    cl::init("none"), cl::sub(kBench));

memra::tools::FloatOption BenchTemp(
    "temp", {0, 100},
    "--batch: sampling temperature of every request; > 0 samples on the device with llama.cpp's default "
    "top-k 40, top-p 0.95, min-p 0.05 (default: 0, greedy, as llama-batched-bench)",
    cl::init(0.0f), cl::sub(kBench));

int Fail(const absl::Status& s) {
  llvm::errs() << "memra bench: " << s.ToString() << "\n";
  return 1;
}

// Tokens per prefill call (the reported n_batch / n_ubatch).
constexpr int64_t kPrefillChunk = 4096;

// The flags --batch cannot be combined with (checked before the model is read).
absl::Status CheckBatchFlags() {
  if (BenchTp.values().size() != 1)
    return absl::InvalidArgumentError(
        absl::StrCat("--batch takes one --tp value (got ", std::string(BenchTp), "): run one --batch bench per split"));
  if (BenchD.getNumOccurrences() > 0)
    return absl::InvalidArgumentError(
        "--batch and -d/--n-depth cannot be used together (every --batch test starts from empty slots)");
  for (int64_t p : BenchP.values())
    if (p == 0)
      return absl::InvalidArgumentError("-p 0 with --batch: every request needs a prompt (give -p 1 or more)");
  if (!std::isfinite(BenchTemp) || BenchTemp < 0)
    return absl::InvalidArgumentError(absl::StrCat("--temp must be a finite number >= 0 (got ", float(BenchTemp), ")"));
  return absl::OkStatus();
}

// `memra bench MODEL --batch 1,8,32 -p 128 -n 128`: for every -p value and B, B requests of -p
// random prompt tokens (distinct per request, a fixed seed) submitted at once to a Scheduler on
// BatchedSlots (max B slots, each context fitting -p + -n + 1, one @step per step), greedy, no stop ids, each
// generating -n + 1 tokens: the first from its prompt's last chunk, then -n decode steps, as
// llama-batched-bench's prefill then tg decodes. The step budget holds all B prompts, so the first
// step prefills every prompt (T_PP: until every request has its first token) and each later step
// decodes one token of every request (T_TG: the rest). Times are the mean over -r repetitions,
// after one untimed warm-up.
//
// Then the time to first token of one more request of -p tokens (an extra slot): alone, and
// submitted while B others decode (after their prompts, between two steps: it shares its first step
// with their decode rows), each the median of 5.
int RunBatchBench(const std::string& model_path, memra::tools::BenchFormat format) {
  using namespace memra;
  using Clock = std::chrono::steady_clock;
  const std::vector<int64_t> batches = BenchBatch.values(), prompts = BenchP.values();
  const int64_t tg = BenchN;
  int64_t max_b = 1, max_p = 1;
  for (int64_t b : batches) max_b = std::max(max_b, b);
  for (int64_t p : prompts) max_p = std::max(max_p, p);
  if (BenchGpuLayers.getNumOccurrences() > 0 || BenchFlashAttn.getNumOccurrences() > 0)
    llvm::errs() << "memra bench: -ngl / -fa ignored: memra runs every layer with its own attention\n";
  auto backend_kind = tools::BackendFromFlag(BenchBackend);
  if (!backend_kind.ok()) return Fail(backend_kind.status());
  const std::string backend_name(runtime::BackendName(*backend_kind));
  std::string weights_error;
  const std::string weights = memra::tools::WeightsForBackend(BenchWeights, backend_name, weights_error);
  if (!weights_error.empty()) return Fail(absl::InvalidArgumentError(weights_error));
  if (!BenchPasses.empty())
    return Fail(absl::InvalidArgumentError("--passes with --batch: the batched engine runs its own pipeline"));
  runtime::BatchedSlotsOptions bo;
  bo.slots = static_cast<int>(max_b + 1);  // + the TTFT probe
  bo.n_ctx = std::max<int64_t>(max_p + tg + 16, 256);
  bo.cache_types = BenchCacheTypes.Types();
  bo.backend = *backend_kind;
  bo.tp = static_cast<int>(BenchTp.values().front());
  {
    auto decode_class = memra::kernels::cuda::ParseDecodeClass(BenchDecodeClass);
    if (!decode_class.ok()) return Fail(decode_class.status());
    bo.decode_class = *decode_class;
  }
  bo.exec.cpu.threads = BenchThreads;
  bo.exec.cpu.weight_mode =
      weights == "dequant" ? runtime::WeightMode::kDequantizeAtLoad : runtime::WeightMode::kPerRow;
  bo.exec.cuda.kernel_cache_dir = BenchCache;
  bo.exec.cuda.cuda_graphs = BenchGraphs;
  bo.exec.cuda.pdl = BenchPdl;
  bo.exec.cuda.weights = weights == "bf16" ? kernels::cuda::WeightMode::kBf16 : kernels::cuda::WeightMode::kBlocks;
  // --profile: device time per op kind over every step of every test (events around each op, so
  // the steps run eagerly: shares, not the table's times).
  bo.exec.cuda.profile = bo.exec.cpu.profile = BenchProfile;
  BenchMemory.Apply(bo.exec);
  const auto t_load = Clock::now();
  auto backend = runtime::BatchedSlots::Open(model_path, bo);
  if (!backend.ok()) return Fail(backend.status());
  runtime::BatchedSlots& slots = **backend;
  const int64_t ctx = slots.ctx_per_slot();
  if (max_p + tg + 1 > ctx)
    return Fail(absl::OutOfRangeError(absl::StrCat("-p ", max_p, " + -n ", tg,
                                                   " + 1 positions do not fit the per-slot "
                                                   "context of ",
                                                   ctx, " tokens")));
  runtime::CpuExecutor* cpu = slots.executor().cpu();
  const int64_t threads = cpu != nullptr ? cpu->num_threads() : 1;
  std::string memory;
  if (runtime::CudaExecutor* gpu = slots.executor().cuda())
    memory = absl::StrCat("; device memory: ", runtime::DescribeDeviceMemory(gpu->device_memory()));
  llvm::errs() << absl::StrFormat(
      "memra bench: --batch on %s: %d slots of context %d (one for the TTFT probe), %d KV blocks, one @step per "
      "scheduler step (at most %s rows), %s, loaded in %.2f s%s\n",
      model_path, max_b + 1, ctx, slots.kv_blocks(),
      slots.max_step_rows() == INT64_MAX ? std::string("any") : absl::StrCat(slots.max_step_rows()),
      slots.executor().Describe(), std::chrono::duration<double>(Clock::now() - t_load).count(), memory);
  const int64_t vocab = slots.n_vocab();
  std::mt19937 rng(1234);

  auto make_request = [&](int64_t p, int64_t max_tokens) {
    runtime::Request r;
    r.prompt.resize(p);
    for (auto& x : r.prompt) x = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(vocab - 1))(rng);
    r.sampling.temperature = BenchTemp;
    if (BenchTemp > 0) {  // llama.cpp's common_params_sampling defaults
      r.sampling.top_k = 40;
      r.sampling.top_p = 0.95f;
      r.sampling.min_p = 0.05f;
    }
    r.seed = rng();
    r.max_tokens = max_tokens;
    return r;
  };
  // One test: B requests of p tokens; returns (t_pp, t_tg) in seconds. probe_ttft: one more request
  // of p tokens submitted after the others' first two decode steps; its time to first token.
  auto run_once = [&](int64_t p, int64_t b, int64_t n_gen, double& t_pp, double& t_tg,
                      double* probe_ttft = nullptr) -> absl::Status {
    runtime::SchedulerOptions opts;
    // Every prompt in the first step where the engine's largest step allows (the GPU's step
    // buckets cap it: the prompts then take several steps, as llama-batched-bench's n_batch).
    // The TTFT probe's prompt fits one step beside the B decode rows.
    opts.step_tokens = std::max<int64_t>({std::min<int64_t>(std::max(b * p, b + p), slots.max_step_rows()),
                                          runtime::MinStepTokens(slots.slots(), opts.prefill_align)});
    auto sched = runtime::Scheduler::Create(slots, opts);
    if (!sched.ok()) return sched.status();
    int64_t first = 0, done = 0;
    absl::Status failed;
    Clock::time_point t_first;
    std::vector<int64_t> counts(b, 0);
    for (int64_t j = 0; j < b; ++j) {
      runtime::Request r = make_request(p, n_gen + 1);
      auto sink = [&, j](const runtime::TokenEvent& e) {
        if (e.token >= 0 && ++counts[j] == 1 && ++first == b) t_first = Clock::now();
        if (!e.last) return;
        ++done;
        if (e.reason != runtime::FinishReason::kLength || counts[j] != n_gen + 1)
          if (failed.ok())
            failed = absl::InternalError(absl::StrCat(
                "request ", j + 1, " of ", b, " ended (", runtime::FinishReasonName(e.reason), ") after ", counts[j],
                " tokens, expected ", n_gen + 1, e.error.ok() ? "" : absl::StrCat(": ", e.error.message())));
      };
      auto id = (*sched)->Submit(std::move(r), sink);
      if (!id.ok()) return id.status();
    }
    const auto t0 = Clock::now();
    if (probe_ttft != nullptr) {
      while (first < b)
        if (absl::Status st = (*sched)->Step(); !st.ok()) return st;
      for (int k = 0; k < 2; ++k)
        if (absl::Status st = (*sched)->Step(); !st.ok()) return st;
      bool got = false;
      Clock::time_point t_got;
      const auto t_submit = Clock::now();
      auto id = (*sched)->Submit(make_request(p, 1), [&](const runtime::TokenEvent& e) {
        if (e.token >= 0 && !got) {
          got = true;
          t_got = Clock::now();
        }
      });
      if (!id.ok()) return id.status();
      while (!got && !(*sched)->idle())
        if (absl::Status st = (*sched)->Step(); !st.ok()) return st;
      if (!got) return absl::InternalError("the TTFT probe ended without a token");
      *probe_ttft = std::chrono::duration<double>(t_got - t_submit).count();
    }
    if (absl::Status st = (*sched)->RunToCompletion(); !st.ok()) return st;
    const auto t1 = Clock::now();
    if (!failed.ok()) return failed;
    if (first != b || done != b) return absl::InternalError("not every request finished");
    t_pp = std::chrono::duration<double>(t_first - t0).count();
    t_tg = std::chrono::duration<double>(t1 - t_first).count();
    return absl::OkStatus();
  };
  {  // warm-up: every slot prefills and decodes once (untimed)
    double a = 0, c = 0;
    if (absl::Status st = run_once(std::min<int64_t>(max_p, 16), max_b, 1, a, c); !st.ok()) return Fail(st);
  }
  std::vector<tools::BatchedBenchRow> rows;
  for (int64_t p : prompts)
    for (int64_t b : batches) {
      tools::BatchedBenchRow row;
      row.pp = p;
      row.tg = tg;
      row.b = b;
      row.n_kv_max = max_b * ctx;
      row.n_batch = std::max<int64_t>({b * p, max_b, 64});
      row.n_ubatch = kPrefillChunk;
      row.n_threads = threads;
      for (int rep = 0; rep < BenchR; ++rep) {
        double t_pp = 0, t_tg = 0;
        if (absl::Status st = run_once(p, b, tg, t_pp, t_tg); !st.ok())
          return Fail(absl::Status(st.code(), absl::StrCat("--batch ", b, " -p ", p, ": ", st.message())));
        row.t_pp += t_pp / BenchR;
        row.t_tg += t_tg / BenchR;
      }
      rows.push_back(row);
    }
  llvm::outs() << tools::RenderBatchedBench(format, rows);

  // TTFT of one more request: alone (b = 0) and beside each B decoding (on stderr: stdout stays
  // llama-batched-bench's output).
  {
    llvm::errs() << "memra bench: time to first token of one more request (median of 5)\n"
                 << "|    PP |    B | TTFT alone ms | TTFT beside B ms | ratio |\n"
                 << "|-------|------|---------------|------------------|-------|\n";
    for (int64_t p : prompts) {
      auto median_ttft = [&](int64_t b, double& out) -> absl::Status {
        std::vector<double> v;
        for (int rep = 0; rep < 5; ++rep) {
          double a = 0, c = 0, t = 0;
          MEMRA_RETURN_IF_ERROR(run_once(p, b, std::min<int64_t>(tg, 8) + 2, a, c, &t));
          v.push_back(t);
        }
        std::sort(v.begin(), v.end());
        out = v[v.size() / 2];
        return absl::OkStatus();
      };
      double alone = 0;
      if (absl::Status st = median_ttft(0, alone); !st.ok()) return Fail(st);
      for (int64_t b : batches) {
        double beside = 0;
        if (absl::Status st = median_ttft(b, beside); !st.ok()) return Fail(st);
        llvm::errs() << absl::StrFormat("| %5d | %4d | %13.2f | %16.2f | %5.2f |\n", p, b, alone * 1e3, beside * 1e3,
                                        beside / alone);
      }
    }
  }
  if (BenchProfile)
    llvm::errs() << "memra bench: profile of every --batch step (warm-up included)\n"
                 << slots.executor().ProfileReport();
  return 0;
}

// One --tp value's tests: the model lowered, partitioned for `tp` ranks and compiled as memra run
// does, then the pp and tg tests, appended to `results`.
absl::Status BenchAtTp(int tp, const std::string& model_path, const memra::gguf::GgufFile& file,
                       memra::runtime::Backend backend, const std::string& weights, const std::vector<int64_t>& P,
                       const std::vector<int64_t>& D, std::vector<memra::tools::BenchRecord>& results) {
  using namespace memra;
  int64_t max_p = 0, max_d = 0;
  for (int64_t p : P) max_p = std::max(max_p, p);
  for (int64_t d : D) max_d = std::max(max_d, d);
  frontends::LowerOptions lo;
  lo.n_ctx = std::max<int64_t>(std::max(max_p, max_d + BenchN) + 16, 256);
  lo.cache_types = BenchCacheTypes.Types();
  auto module = frontends::LowerModel(file, lo);
  if (!module.ok()) return module.status();

  // The same compile pipeline as memra run (fused ops, bucket functions, memory plan, segments).
  passes::PassManagerOptions pm_opts;
  pm_opts.pipeline = std::string(BenchPasses);
  if (BenchPasses.empty()) {
    pm_opts.pipeline = passes::PipelineForArch("cpu");
    if (backend == runtime::Backend::kCuda) {  // selected for this GPU (kernels/cuda/Target.h)
      auto target = runtime::CudaDeviceTarget(0);
      if (!target.ok()) return target.status();
      pm_opts.pipeline = passes::PipelineForTarget(target->ArchName(), target->sm_count, weights);
    }
  }
  pm_opts.pipeline = passes::WithTensorParallel(pm_opts.pipeline, tp);
  pm_opts.input_name = model_path;
  {
    auto pm = passes::PassManager::Create(pm_opts);
    if (!pm.ok()) return pm.status();
    if (absl::Status st = (*pm)->Run(**module); !st.ok()) return st;
  }

  runtime::ExecutorOptions eo;
  eo.cpu.threads = BenchThreads;
  eo.cuda.kernel_cache_dir = BenchCache;
  eo.cuda.profile = BenchProfile;
  eo.cuda.cuda_graphs = BenchGraphs;
  eo.cuda.pdl = BenchPdl;
  eo.cuda.skip_ops.assign(BenchProfileSkip.begin(), BenchProfileSkip.end());
  eo.cpu.profile = BenchProfile;
  eo.cpu.weight_mode = weights == "dequant" ? runtime::WeightMode::kDequantizeAtLoad : runtime::WeightMode::kPerRow;
  eo.cuda.weights = weights == "bf16" ? kernels::cuda::WeightMode::kBf16 : kernels::cuda::WeightMode::kBlocks;
  BenchMemory.Apply(eo);
  auto exec_or = runtime::CreateExecutor(backend, **module, file, eo);
  if (!exec_or.ok()) return exec_or.status();
  runtime::Executor& exec = **exec_or;
  runtime::CudaExecutor* gpu = exec.cuda();
  if (gpu != nullptr)
    llvm::errs() << absl::StrFormat(
        "memra bench: %s, weights as %s, loaded in %.1f s, cuda graphs %s, pdl %s; device memory: %s\n",
        gpu->DeviceDescription(), weights, gpu->load_seconds(), BenchGraphs ? "on" : "off",
        gpu->programmatic_launch() ? "on" : "off", runtime::DescribeDeviceMemory(gpu->device_memory()));
  const int64_t vocab = (*module)->attrs().I64Or("n_vocab", 2);
  std::mt19937 rng(1234);
  auto ids = [&](int64_t n) {
    std::vector<int32_t> v(n);
    for (auto& x : v) x = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(vocab - 1))(rng);
    return v;
  };
  // A chunk of exactly a bucket's size runs its bucket function (captured segments), any other
  // size the generic @prefill (eager, padded to its bucket), as Session does.
  // A module with sliding-window rings takes at most its max_call_rows per call.
  const int64_t call_rows = std::min(kPrefillChunk, (*module)->attrs().I64Or("max_call_rows", kPrefillChunk));
  auto prefill = [&](int64_t n) -> absl::Status {
    for (int64_t s = 0; s < n; s += call_rows) {
      const int64_t len = std::min<int64_t>(call_rows, n - s);
      const std::string bucket_fn = absl::StrCat("prefill_t", len);
      std::vector<runtime::HostTensor> args;
      args.push_back(runtime::HostTensor::FromI32(ids(len), {len}));
      auto r = exec.Run((*module)->function(bucket_fn) != nullptr ? bucket_fn : "prefill", std::move(args));
      if (!r.ok()) return r.status();
    }
    return absl::OkStatus();
  };
  auto reset_profile = [&]() {
    if (gpu) gpu->ResetProfile();
  };
  using Clock = std::chrono::steady_clock;
  auto nanos = [](Clock::time_point a) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - a).count());
  };
  // What every test shares (tools/BenchReport.h says what each field means for memra).
  tools::BenchRecord base;
  base.build_commit = absl::StrCat("memra ", MEMRA_VERSION);
  base.cpu_info = tools::HostCpuDescription();
  // GPU ranks (tp > 1) are behind the tensor-parallel executor, which has no one CudaExecutor.
  const bool on_gpu = backend == runtime::Backend::kCuda;
  base.gpu_info = gpu != nullptr ? gpu->DeviceDescription() : on_gpu ? exec.Describe() : "";
  base.backends = on_gpu ? "CUDA" : "CPU";
  base.model_filename = model_path;
  base.model_type = tools::ModelTypeName(file);
  for (const auto& t : file.tensors()) {
    base.model_size += t.data.size();
    base.model_n_params += static_cast<uint64_t>(std::max<int64_t>(t.NumElements(), 0));
  }
  base.n_batch = base.n_ubatch = kPrefillChunk;
  base.n_threads = exec.cpu() != nullptr ? exec.cpu()->num_threads() : 1;
  base.tp = tp;
  if (tp > 1 && !on_gpu)  // the ranks share the threads
    base.n_threads = BenchThreads > 0 ? int(BenchThreads) : kernels::cpu::ThreadPool::DefaultThreadCount();
  base.type_k = std::string(ir::DTypeName(lo.cache_types.k));
  base.type_v = std::string(ir::DTypeName(lo.cache_types.v));
  base.n_gpu_layers = on_gpu ? -1 : 0;  // -ngl is ignored: memra puts every layer on the GPU
  base.flash_attn = on_gpu ? 1 : 0;
  base.devices = "none";
  if (on_gpu) {  // rank r on GPU r
    std::vector<std::string> devices;
    for (int r = 0; r < tp; ++r) devices.push_back(absl::StrCat("CUDA", r));
    base.devices = absl::StrJoin(devices, "/");
  }
  for (int64_t p : P) {
    if (p == 0) continue;
    tools::BenchRecord r = base;
    r.n_prompt = p;
    r.test_time = tools::Rfc3339Now();
    for (int rep = -2; rep < BenchR; ++rep) {  // reps -2, -1: warm-up (compile, then capture)
      if (absl::Status s = exec.ResetState(); !s.ok()) return s;
      if (rep == 0) reset_profile();
      const auto t0 = Clock::now();
      if (absl::Status s = prefill(p); !s.ok()) return s;
      if (rep >= 0) r.samples_ns.push_back(nanos(t0));
    }
    results.push_back(r);
    if (BenchProfile) {
      llvm::errs() << "memra bench: profile of " << r.TestName() << " (" << BenchR << " reps)\n"
                   << exec.ProfileReport();
      reset_profile();
    }
  }
  // Decode: greedy steps through Executor::DecodeGreedy (on CUDA the device loop: one graph launch
  // per step, one sync per test), as llama-bench's tg runs decode without host sampling.
  if (BenchN > 0)
    for (int64_t d : D) {
      tools::BenchRecord r = base;
      r.n_gen = BenchN;
      r.n_depth = d;
      r.test_time = tools::Rfc3339Now();
      for (int rep = -1; rep < BenchR; ++rep) {
        if (absl::Status s = exec.ResetState(); !s.ok()) return s;
        if (d > 0)
          if (absl::Status s = prefill(d); !s.ok()) return s;
        if (rep == 0) reset_profile();
        const int64_t n = rep < 0 ? 4 : BenchN;
        const auto t0 = Clock::now();
        auto out = exec.DecodeGreedy(ids(1)[0], n);
        if (!out.ok()) return out.status();
        if (rep >= 0) r.samples_ns.push_back(nanos(t0));
      }
      results.push_back(r);
      if (BenchProfile) {
        llvm::errs() << "memra bench: profile of " << r.TestName() << " (decode steps; depth prefill included)\n"
                     << exec.ProfileReport();
        reset_profile();
      }
    }
  if (gpu) {
    const runtime::GraphStats& g = gpu->graph_stats();
    llvm::errs() << "memra bench: " << gpu->compile_stats().ToString()
                 << absl::StrFormat("; cuda graphs: %d captured (%.1f ms), %d launches, %d eager segment runs\n",
                                    g.captured, g.capture_ms, g.launches, g.eager_segments);
    if (!BenchProfileSkip.empty()) {
      for (const std::string& name : BenchProfileSkip)
        if (!g.skip_matched.contains(name))
          return absl::InvalidArgumentError(absl::StrCat(
              "--profile-skip: no op, unit or kernel of this model is named \"", name, "\" (no result reported)"));
      llvm::errs() << "memra bench: --profile-skip=" << absl::StrJoin(BenchProfileSkip, ",") << ": "
                   << g.skipped_actions
                   << " device actions not issued over every capture and eager run (timing only: the outputs are "
                      "garbage)\n";
    }
    llvm::errs() << "memra bench: device memory after the tests: "
                 << runtime::DescribeDeviceMemory(gpu->device_memory()) << "\n";
  }
  return absl::OkStatus();
}

int RunBench() {
  using namespace memra;
  // The options layer checks both already; kept here so the body never renders a wrong format or
  // an empty statistic if a flag's declaration changes.
  auto format = tools::ParseBenchFormat(std::string(BenchOut));
  if (!format.ok()) return Fail(format.status());
  if (BenchR < 1) return Fail(absl::InvalidArgumentError(absl::StrCat("-r must be >= 1 (got ", int(BenchR), ")")));
  std::string model_path, model_error;
  if (!BenchModelArg.Resolve(model_path, model_error)) return Fail(absl::InvalidArgumentError(model_error));
  if (BenchBatch.getNumOccurrences() > 0) {
    if (!BenchProfileSkip.empty())
      return Fail(absl::InvalidArgumentError("--profile-skip times the pp / tg tests only, not --batch"));
    if (absl::Status st = CheckBatchFlags(); !st.ok()) return Fail(st);
    return RunBatchBench(model_path, *format);
  }
  // --temp samples --batch's requests; llama-bench's tests are greedy.
  if (BenchTemp.getNumOccurrences() > 0)
    return Fail(absl::InvalidArgumentError("--temp applies to --batch tests only (the pp / tg tests are greedy)"));
  const std::vector<int64_t> P_list = BenchP.values(), D_list = BenchD.values();
  if (BenchN == 0 && std::all_of(P_list.begin(), P_list.end(), [](int64_t p) { return p == 0; }))
    return Fail(absl::InvalidArgumentError("nothing to measure: -p is 0 and -n is 0 (give a prompt or decode length)"));
  const std::vector<int64_t>* P = &P_list;
  const std::vector<int64_t>* D = &D_list;
  if (BenchGpuLayers.getNumOccurrences() > 0 || BenchFlashAttn.getNumOccurrences() > 0)
    llvm::errs() << "memra bench: -ngl / -fa ignored: every layer runs on the GPU with memra's fused attention\n";
  auto file = gguf::GgufFile::Open(model_path);
  if (!file.ok()) return Fail(file.status());
  std::string backend_name = BenchBackend;
  if (backend_name.empty()) backend_name = std::string(runtime::BackendName(runtime::DefaultBackend()));
  auto backend = runtime::ParseBackend(backend_name);
  if (!backend.ok()) return Fail(backend.status());
  if (!BenchProfileSkip.empty() &&
      (*backend != runtime::Backend::kCuda || absl::c_any_of(BenchTp.values(), [](int64_t t) { return t > 1; })))
    return Fail(absl::InvalidArgumentError("--profile-skip needs --backend cuda on one GPU (--tp 1)"));
  std::string weights_error;
  const std::string weights = memra::tools::WeightsForBackend(BenchWeights, backend_name, weights_error);
  if (!weights_error.empty()) return Fail(absl::InvalidArgumentError(weights_error));
  std::vector<tools::BenchRecord> results;
  const std::vector<int64_t> tps = BenchTp.values();
  for (int64_t tp : tps)
    if (absl::Status st = BenchAtTp(static_cast<int>(tp), model_path, **file, *backend, weights, *P, *D, results);
        !st.ok())
      return Fail(tps.size() > 1 ? absl::Status(st.code(), absl::StrCat("--tp ", tp, ": ", st.message())) : st);
  llvm::outs() << tools::RenderBench(*format, results);
  if (tps.size() > 1) llvm::errs() << "memra bench: tensor-parallel scaling\n" << tools::RenderTpScaling(results);
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kBench, RunBench);
