// The plan's kernel table (version 1) on the qwen35-tiny-f32 fixture: the CUDA pipeline
// (select-kernels included) with one prefill bucket, the plan written and read back: same IR,
// every kernel module the static functions select present with an ELF cubin for sm_90, the
// precompiled map exactly those modules and a KernelCompiler seeded with it compiling nothing;
// a corrupted or incomplete table is refused naming the kernel. Needs NVRTC (no GPU): without
// it the cubin tests skip.
#include <set>
#include <string>
#include <vector>

#include "codegen/KernelCompiler.h"
#include "codegen/KernelModules.h"
#include "codegen/Nvrtc.h"
#include "codegen/SelectKernelsPass.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "ir/Function.h"
#include "ir/Op.h"
#include "ir/Printer.h"
#include "kernels/cuda/Target.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Plan.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::FileExists;
using memra::testing::TestDataPath;
using memra::testing::UniqueTempPath;

std::string Model() { return TestDataPath("models/qwen35-tiny-f32.gguf"); }

absl::Status Compile(ir::Module& m, absl::string_view pipeline) { return memra::testing::CompileModule(m, pipeline); }

// The tiny model lowered and compiled for `arch` with prefill bucket 16.
absl::StatusOr<std::unique_ptr<ir::Module>> CompiledTiny(const gguf::GgufFile& file, absl::string_view arch) {
  auto m = frontends::LowerModel(file, {});
  if (!m.ok()) return m.status();
  if (absl::Status st = Compile(**m, passes::WithBucketLadder(passes::PipelineForArch(arch), "16")); !st.ok())
    return st;
  return std::move(*m);
}

TEST(KernelTable, PipelineForArch) {
  EXPECT_EQ(passes::PipelineForArch("cpu"), passes::kDefaultPipeline);
  EXPECT_EQ(passes::PipelineForArch("sm_90"), passes::kCudaPipeline);
  EXPECT_NE(passes::PipelineForArch("sm_80").find("select-kernels{arch=sm_80},plan-memory"), std::string::npos);
  EXPECT_EQ(passes::kDefaultPipeline.find("select-kernels"), absl::string_view::npos);
  // --weights bf16 reaches select-kernels; the default (blocks) keeps the pipeline as it was.
  EXPECT_EQ(passes::PipelineForArch("sm_90", "blocks"), passes::kCudaPipeline);
  EXPECT_NE(passes::PipelineForArch("sm_90", "bf16").find("select-kernels{weights=bf16},plan-memory"),
            std::string::npos);
  EXPECT_NE(passes::PipelineForArch("sm_80", "bf16").find("select-kernels{arch=sm_80 weights=bf16}"),
            std::string::npos);
  EXPECT_NE(
      passes::PipelineForTarget("sm_90", 114, "bf16").find("select-kernels{arch=sm_90 sm-count=114 weights=bf16}"),
      std::string::npos);
  EXPECT_EQ(passes::PipelineForArch("cpu", "bf16"), passes::kDefaultPipeline);
}

TEST(KernelTable, ThePlanRecordsItsWeightMode) {
  Plan p;
  p.arch = "sm_90";
  p.gguf.header_sha256 = "ab";
  p.weights = "bf16";
  auto back = ParsePlan(SerializePlan(p), "w.plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->weights, "bf16");
  EXPECT_EQ(PlanWeights(*back).value(), kernels::cuda::WeightMode::kBf16);
  p.weights = "blocks";
  EXPECT_EQ(PlanWeights(*ParsePlan(SerializePlan(p), "w.plan")).value(), kernels::cuda::WeightMode::kBlocks);
  p.weights.clear();  // a CUDA plan from before the line: its block formats were bf16 copies
  EXPECT_EQ(PlanWeights(*ParsePlan(SerializePlan(p), "w.plan")).value(), kernels::cuda::WeightMode::kBf16);
  p.arch = "cpu";
  EXPECT_FALSE(PlanWeights(p).value().has_value());
  p.arch = "sm_90";
  p.weights = "q8";
  EXPECT_FALSE(ParsePlan(SerializePlan(p), "w.plan").ok());
}

// A cpu plan: no select-kernels annotations, an empty version-0 table that reads back.
TEST(KernelTable, CpuPlanHasAnEmptyTable) {
  if (!FileExists(Model())) GTEST_SKIP() << "tiny model fixture not found: " << Model();
  auto file = gguf::GgufFile::Open(Model());
  ASSERT_TRUE(file.ok()) << file.status();
  auto m = CompiledTiny(**file, "cpu");
  ASSERT_TRUE(m.ok()) << m.status();
  for (const auto& f : (*m)->functions())
    for (const ir::Op* op : f->Ops()) ASSERT_FALSE(op->attrs().Has("kernels")) << op->Summary();
  auto plan = MakePlan(**m, **file, "cpu", passes::kDefaultPipeline, "test");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kernels.version, 0);
  EXPECT_TRUE(plan->kernels.kernels.empty());
  auto back = ParsePlan(SerializePlan(*plan), "cpu.plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kernels.version, 0);
  ASSERT_TRUE(LoadPlanModule(*back).ok());
  auto pre = PrecompiledKernels(*back);
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_TRUE((*pre)->empty());
}

TEST(KernelTable, Sm90PlanCarriesEveryCubin) {
  auto nvrtc = codegen::Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here (the kernel table needs it): " << nvrtc.status();
  if (!FileExists(Model())) GTEST_SKIP() << "tiny model fixture not found: " << Model();
  auto file = gguf::GgufFile::Open(Model());
  ASSERT_TRUE(file.ok()) << file.status();
  auto m = CompiledTiny(**file, "sm_90");
  ASSERT_TRUE(m.ok()) << m.status();

  // select-kernels annotated the static functions (and left the symbolic @prefill alone); the
  // fused ops' scratch was placed by plan-memory.
  std::set<std::string> expected;
  int64_t annotated = 0, scratch = 0;
  for (const auto& f : (*m)->functions()) {
    bool is_static = f->name() == "decode" || f->attrs().Has("bucket_of");
    for (const ir::Op* op : f->Ops()) {
      if (!is_static) {
        EXPECT_FALSE(op->attrs().Has("kernels")) << "@" << f->name() << ": " << op->Summary();
        continue;
      }
      annotated += op->attrs().Has("kernels");
      if (op->attrs().Has("scratch_bytes")) {
        ++scratch;
        EXPECT_TRUE(op->attrs().Has("scratch")) << op->Summary();
      }
      // qk_norm_rope keeps its normalized rows in the scratch; a matmul_swiglu on cuBLASLt its gate
      // and up products (on a GEMV, f32 weights included, it needs none).
      if (op->is(ir::OpKind::kQkNormRope) || (op->is(ir::OpKind::kMatMulSwiglu) && !op->attrs().Has("gemv")))
        EXPECT_GT(op->attrs().I64Or("scratch_bytes", 0), 0) << op->Summary();
    }
    if (!is_static) continue;
    auto mods = codegen::ModulesForFunction(*f, f->attrs().I64Or("bucket", 1), *kernels::cuda::TargetPreset("sm_90"),
                                            kernels::cuda::WeightMode::kBlocks);
    ASSERT_TRUE(mods.ok()) << mods.status();
    for (const auto& ms : *mods) expected.insert(ms.Key());
  }
  EXPECT_GT(annotated, 50);
  EXPECT_GT(scratch, 0);
  ASSERT_FALSE(expected.empty());

  auto plan = MakePlan(**m, **file, "sm_90", passes::kCudaPipeline, "test");
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::printf("  kernel table: %zu modules, %lld cubin bytes; %s\n", plan->kernels.kernels.size(),
              static_cast<long long>(plan->kernels.CubinBytes()), plan->kernels.compile_stats.ToString().c_str());
  EXPECT_EQ(plan->kernels.version, kKernelTableVersion);
  EXPECT_EQ(plan->weights, "blocks");
  const std::string path = UniqueTempPath("memra-kernel-table-test.plan");
  ASSERT_TRUE(WritePlan(*plan, path).ok());
  auto back = ReadPlan(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ir_text, plan->ir_text);
  EXPECT_EQ(back->weights, "blocks");
  auto loaded = LoadPlanModule(*back);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(ir::ToText(**loaded), ir::ToText(**m));

  ASSERT_EQ(back->kernels.kernels.size(), expected.size());
  for (const KernelEntry& k : back->kernels.kernels) {
    EXPECT_TRUE(expected.count(k.name)) << k.name;
    ASSERT_EQ(k.binaries.size(), 1u) << k.name;
    EXPECT_EQ(k.binaries[0].arch, "sm_90");
    ASSERT_GT(k.binaries[0].cubin.size(), 4u) << k.name;
    EXPECT_EQ(k.binaries[0].cubin.substr(0, 4),
              "\x7f"
              "ELF")
        << k.name;
  }
  auto pre = PrecompiledKernels(*back);
  ASSERT_TRUE(pre.ok()) << pre.status();
  std::set<std::string> got;
  for (const auto& [key, cubin] : **pre) got.insert(key);
  EXPECT_EQ(got, expected);

  // A compiler seeded with the plan's cubins compiles nothing (no disk cache either).
  codegen::CompileOptions co;
  co.cache_dir = "-";
  auto compiler = codegen::KernelCompiler::Create(co);
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  (*compiler)->AddPrecompiled(**pre);
  auto all = KernelModulesOf(**loaded);
  ASSERT_TRUE(all.ok()) << all.status();
  auto cubins = (*compiler)->CompileAll(*all);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  EXPECT_EQ((*compiler)->stats().plan_hits, static_cast<int64_t>(expected.size()));
  EXPECT_EQ((*compiler)->stats().compiled, 0);
  EXPECT_NE((*compiler)->stats().ToString().find("from the plan"), std::string::npos);

  // Corruption is refused, naming the kernel. Any change to the file fails its xxh64 line first;
  // the checks below it are reached by re-sealing the edited plan.
  const std::string bytes = SerializePlan(*back);
  const KernelEntry& first = back->kernels.kernels.front();
  auto resealed = [](std::string plan) {
    plan.erase(plan.rfind("xxh64 "));
    return SealPlan(std::move(plan));
  };
  {  // a flipped byte inside a cubin
    const size_t at = bytes.find(first.binaries[0].cubin);
    ASSERT_NE(at, std::string::npos);
    std::string bad = bytes;
    bad[at + first.binaries[0].cubin.size() / 2] ^= 0x5a;
    auto sealed = ParsePlan(bad, "flipped.plan");
    ASSERT_FALSE(sealed.ok());
    EXPECT_NE(sealed.status().message().find("xxh64 does not match"), std::string::npos) << sealed.status();
    auto r = ParsePlan(resealed(bad), "flipped.plan");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(first.name), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("hash"), std::string::npos) << r.status();
  }
  {  // a module missing from the table
    Plan missing = *back;
    missing.kernels.kernels.erase(missing.kernels.kernels.begin());
    auto r = LoadPlanModule(missing);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(first.name), std::string::npos) << r.status();
  }
  {  // a cubin for another arch only
    Plan other = *back;
    other.kernels.kernels.front().binaries[0].arch = "sm_80";
    auto r = LoadPlanModule(*ParsePlan(SerializePlan(other), "other.plan"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no cubin for sm_90"), std::string::npos) << r.status();
  }
  {  // a kernel whose source this memra does not have any more
    Plan stale = *back;
    stale.kernels.kernels.front().source_hash = "0000";
    auto r = PrecompiledKernels(stale);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(first.name), std::string::npos) << r.status();
  }
  {  // an unknown table version, and a table cut inside a kernel's cubins
    std::string newer = bytes;
    const size_t v = newer.find("[kernels] version=1");
    ASSERT_NE(v, std::string::npos);
    newer[v + std::string("[kernels] version=").size()] = '7';
    auto r = ParsePlan(resealed(newer), "v7.plan");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("kernel table version 7"), std::string::npos) << r.status();

    Plan cut = *back;
    cut.kernels.kernels.front().binaries.clear();  // announces 1 cubin below, has none
    std::string text = SerializePlan(cut);
    const std::string announce = "binaries = 0";
    const size_t b = text.find(announce);
    ASSERT_NE(b, std::string::npos);
    text.replace(b, announce.size(), "binaries = 1");
    auto c = ParsePlan(resealed(text), "cut.plan");
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find(first.name), std::string::npos) << c.status();
  }
}

// select-kernels names a module the table builder does not know: refused.
TEST(KernelTable, StaleAnnotationsAreRefused) {
  if (!FileExists(Model())) GTEST_SKIP() << "tiny model fixture not found: " << Model();
  auto file = gguf::GgufFile::Open(Model());
  ASSERT_TRUE(file.ok()) << file.status();
  auto m = CompiledTiny(**file, "sm_90");
  ASSERT_TRUE(m.ok()) << m.status();
  ir::Function* decode = (*m)->function("decode");
  ASSERT_NE(decode, nullptr);
  for (ir::Op* op : decode->Ops())
    if (op->attrs().Has("kernels")) {
      op->attrs().Set("kernels", std::vector<std::string>{"Nope.cu<X=1>::nope"});
      break;
    }
  auto mods = KernelModulesOf(**m);
  ASSERT_FALSE(mods.ok());
  EXPECT_NE(mods.status().message().find("Nope.cu<X=1>::nope"), std::string::npos) << mods.status();
}

}  // namespace
}  // namespace memra::runtime
