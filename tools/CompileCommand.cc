// `memra compile MODEL.gguf -o MODEL.plan`: lowers the model, runs the compile pipeline for the
// target (passes/Pipelines.h PipelineForArch: fusion, bucket-shapes, for sm_NN select-kernels,
// plan-memory, partition-segments) and writes one plan file (runtime/plan/Plan.h) that
// `memra run MODEL.plan` starts from without compiling; for sm_NN the plan's kernel table holds
// the NVRTC cubins of every kernel module (runtime/plan/KernelTable.h). Needs no GPU.
// --report prints a table per function (bucket): ops before/after fusion, segments, kernel
// launches and modules, arena bytes vs the naive sum, and the compile / NVRTC time.
#include <chrono>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/SelectKernelsPass.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Module.h"
#include "kernels/cuda/Target.h"
#include "llvm/Support/raw_ostream.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/DeviceMemory.h"
#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Plan.h"
#include "tools/Command.h"
#include "tools/Options.h"
#include "tools/PassManagerFlags.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kCompile("compile", "Compile a GGUF model into a plan file (IR, buckets, arena layout, segments)");
cl::opt<std::string> CompileModel(cl::Positional, cl::Required, cl::desc("<model.gguf>"), cl::sub(kCompile));
// The default shown is the CUDA one (the default --arch); --arch cpu defaults to kDefaultPipeline.
memra::tools::PassManagerFlags CompilePmFlags(kCompile, memra::passes::kCudaPipeline.data());
cl::opt<std::string> CompileOut("o", cl::desc("Plan file to write (default: MODEL.plan beside the GGUF)"), cl::init(""),
                                cl::sub(kCompile));
cl::opt<std::string> CompileBuckets("buckets",
                                    cl::desc("Prefill token buckets: 16,32,64 or 16..4096 (powers of two) "
                                             "(default: the pipeline's, 16..4096 capped at the context)"),
                                    cl::init(""), cl::sub(kCompile));
memra::tools::IntOption<int> CompileTp("tp", {1, 64},
                                       "Tensor-parallel ranks the plan is partitioned for (shard-tensor-parallel in "
                                       "front of the pipeline; recorded as the module's tp)",
                                       cl::init(1), cl::sub(kCompile));
cl::opt<std::string> CompileArch("arch", cl::desc("Target: sm_90 (H100/H200) or cpu (default: sm_90)"),
                                 cl::init("sm_90"), cl::sub(kCompile));
memra::tools::ChoiceOption CompileWeights("weights", {"blocks", "bf16"},
                                          "CUDA targets: how block-format matrices are held, blocks (as the GGUF "
                                          "stores them) or bf16 (dequantized at upload); recorded in the plan",
                                          cl::init("blocks"), cl::sub(kCompile));
cl::opt<bool> CompileReport("report",
                            cl::desc("Print a table per bucket: ops before/after fusion, segments, arena "
                                     "bytes, compile time (default: false)"),
                            cl::init(false), cl::sub(kCompile));
memra::tools::IntOption<int64_t> CompileCtx("ctx-size", {0, memra::tools::kMaxContext},
                                            "Context length (KV cache rows), 0 = the model's, capped at 4096",
                                            cl::init(0), cl::sub(kCompile));
cl::alias CompileCtxLong("c", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(CompileCtx));
memra::tools::CacheTypeOptions CompileCacheTypes(kCompile);
cl::opt<bool> CompileAllLogits("all-logits",
                               cl::desc("Prefill returns the logits of every token (memra run --logits-out needs it) "
                                        "(default: false)"),
                               cl::init(false), cl::sub(kCompile));

int Fail(const absl::Status& st) {
  llvm::errs() << "memra compile: " << st.ToString() << "\n";
  return 1;
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Bytes(int64_t b) {
  if (b >= (1 << 20)) return absl::StrFormat("%.2f MiB", b / 1048576.0);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrCat(b, " B");
}

int RunCompile() {
  using namespace memra;
  const auto t0 = std::chrono::steady_clock::now();
  if (!runtime::IsValidArch(CompileArch))
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--arch ", std::string(CompileArch), ": expected sm_NN or cpu")));
  if (std::string(CompileArch) != "cpu") {
    auto t = memra::kernels::cuda::TargetPreset(CompileArch);
    if (!t.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--arch: ", t.status().message())));
    if (absl::Status st = memra::kernels::cuda::CheckKernelsSupport(*t); !st.ok())
      return Fail(absl::Status(st.code(), absl::StrCat("--arch ", std::string(CompileArch), ": ", st.message())));
  }
  if (std::string(CompileArch) == "cpu" && CompileWeights.getNumOccurrences() > 0)
    return Fail(absl::InvalidArgumentError(
        "--weights applies to CUDA targets (--arch sm_NN); a cpu plan's weights are the executor's choice "
        "(memra run --weights per-row|dequant)"));
  auto file = gguf::GgufFile::Open(CompileModel);
  if (!file.ok()) return Fail(file.status());
  frontends::LowerOptions lo;
  lo.n_ctx = CompileCtx;
  lo.cache_types = CompileCacheTypes.Types();
  lo.prefill_all_logits = CompileAllLogits;
  auto module = frontends::LowerModel(**file, lo);
  if (!module.ok()) return Fail(module.status());
  const double lower_s = Since(t0);
  // Ops of the lowered (unfused) functions, for the report.
  absl::flat_hash_map<std::string, int64_t> ops_before;
  for (const auto& f : (*module)->functions()) ops_before[f->name()] = static_cast<int64_t>(f->NumOps());

  codegen::RegisterCodegenPasses();  // select-kernels lives in codegen (see SelectKernelsPass.h)
  passes::PassManagerOptions pm_opts = CompilePmFlags.Options();
  if (!CompilePmFlags.pipeline_given()) pm_opts.pipeline = passes::PipelineForArch(CompileArch, CompileWeights);
  pm_opts.pipeline = passes::WithBucketLadder(pm_opts.pipeline, CompileBuckets);
  pm_opts.pipeline = passes::WithTensorParallel(pm_opts.pipeline, CompileTp);
  pm_opts.input_name = CompileModel;
  auto pm = passes::PassManager::Create(pm_opts);
  if (!pm.ok()) return Fail(pm.status());
  const auto t1 = std::chrono::steady_clock::now();
  if (absl::Status st = (*pm)->Run(**module); !st.ok()) return Fail(st);
  const double passes_s = Since(t1);

  const auto t2 = std::chrono::steady_clock::now();
  auto plan = runtime::MakePlan(**module, **file, CompileArch, (*pm)->PipelineString(), MEMRA_VERSION);
  if (!plan.ok()) return Fail(plan.status());
  const double plan_s = Since(t2);
  std::string out = CompileOut.empty() ? absl::StrCat(std::string(CompileModel), ".plan") : std::string(CompileOut);
  if (absl::EndsWith(std::string(CompileModel), ".gguf") && CompileOut.empty())
    out = absl::StrCat(std::string(CompileModel).substr(0, CompileModel.size() - 5), ".plan");
  if (absl::Status st = runtime::WritePlan(*plan, out); !st.ok()) return Fail(st);
  const double total_s = Since(t0);

  if (CompileReport) {
    llvm::outs() << absl::StrFormat("memra compile: %s -> %s (arch %s%s)\n", std::string(CompileModel), out, plan->arch,
                                    plan->weights.empty() ? "" : absl::StrCat(", weights as ", plan->weights));
    llvm::outs() << absl::StrFormat("%-16s %7s %10s %9s %8s %8s %8s %8s %8s %10s %12s %12s %6s\n", "function", "bucket",
                                    "ops before", "ops after", "segments", "captured", "eager", "launches", "modules",
                                    "cubins", "arena", "naive", "reuse");
    for (const auto& f : (*module)->functions()) {
      const runtime::PlanFunction* pf = nullptr;
      for (const auto& p : plan->functions)
        if (p.name == f->name()) pf = &p;
      std::string origin = f->attrs().GetString("bucket_of").value_or(f->name());
      int64_t before = ops_before.contains(origin) ? ops_before[origin] : 0;
      int64_t segs = 0, captured = 0, eager = 0, after = 0, launches = 0, cubin_bytes = 0;
      std::set<std::string> modules;
      for (const ir::Op* op : f->Ops()) {
        if (op->is(ir::OpKind::kSegment)) {
          ++segs;
          (op->attrs().I64Or("capturable", 0) ? captured : eager) += static_cast<int64_t>(op->body()->size());
        } else {
          ++after;
        }
        for (const std::string& k : op->attrs().GetStringArray("kernels").value_or(std::vector<std::string>{})) {
          ++launches;
          const std::string key = k.substr(0, k.rfind("::"));
          if (modules.insert(key).second)
            if (const runtime::KernelEntry* e = plan->kernels.Find(key))
              for (const auto& b : e->binaries) cubin_bytes += static_cast<int64_t>(b.cubin.size());
        }
      }
      const int64_t arena = pf ? pf->arena_bytes : 0, naive = pf ? pf->naive_bytes : 0;
      llvm::outs() << absl::StrFormat("%-16s %7s %10d %9d %8d %8d %8d %8d %8d %10s %12s %12s %5.1fx\n", "@" + f->name(),
                                      f->attrs().Has("bucket") ? absl::StrCat(f->attrs().I64Or("bucket", 0)) : "-",
                                      before, after, segs, captured, eager, launches, modules.size(),
                                      Bytes(cubin_bytes), Bytes(arena), Bytes(naive),
                                      arena > 0 ? static_cast<double>(naive) / arena : 0.0);
    }
    const auto& ks = plan->kernels.compile_stats;
    if (plan->kernels.version >= 1)
      llvm::outs() << absl::StrFormat(
          "kernel table: version %d, %d kernel modules, %s of cubins for %s; NVRTC: %d compiled in %.2f s, "
          "%d from the disk cache, %.2f s wall\n",
          plan->kernels.version, plan->kernels.kernels.size(), Bytes(plan->kernels.CubinBytes()), plan->arch,
          ks.compiled, ks.compile_seconds, ks.disk_hits, ks.wall_seconds);
    else
      llvm::outs() << absl::StrFormat("kernel table: version %d, empty (arch %s: no CUDA kernels)\n",
                                      plan->kernels.version, plan->arch);
    if (plan->arch != "cpu") {
      // What memra run of this plan will hold on the device (the executor checks it before the upload).
      auto mode = runtime::PlanWeights(*plan);
      auto target = kernels::cuda::Target::Parse(plan->target);
      if (!mode.ok() || !target.ok()) return Fail(mode.ok() ? target.status() : mode.status());
      const kernels::cuda::WeightMode weights = mode->value_or(kernels::cuda::WeightMode::kBlocks);
      auto planned = runtime::PlanWeights(**module, **file, weights);
      if (!planned.ok()) return Fail(planned.status());
      auto memory = runtime::PlannedDeviceMemory(**module, *planned, *target, weights);
      if (!memory.ok()) return Fail(memory.status());
      llvm::outs() << absl::StrFormat("device memory (weights as %s; arenas: the largest bucket's): %s\n",
                                      kernels::cuda::WeightModeName(weights), runtime::DescribeDeviceMemory(*memory));
    }
    llvm::outs() << absl::StrFormat("compile time: %.3f s (lower %.3f s, passes %.3f s, plan %.3f s); plan %s\n",
                                    total_s, lower_s, passes_s, plan_s, out);
  } else {
    llvm::errs() << absl::StrFormat("memra compile: wrote %s (%d functions, %.2f s)\n", out, plan->functions.size(),
                                    total_s);
  }
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kCompile, RunCompile);
