// On the GPU: a CUDA executor seeded with a plan's kernel table (runtime::PrecompiledKernels ->
// CudaExecutorOptions::precompiled) compiles nothing for @decode: every module comes from the
// plan (KernelCompiler's plan_hits), none from NVRTC or the disk cache (disabled here), and the
// decode step runs. Skips without a GPU or NVRTC.
#include <cstdio>
#include <string>
#include <vector>

#include "codegen/Nvrtc.h"
#include "codegen/SelectKernelsPass.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Plan.h"
#include "tests/cuda/CudaTestUtil.h"

namespace memra::runtime {
namespace {

TEST(PlanKernels, DecodeRunsFromThePlansCubins) {
  auto dev = cuda::CudaDevice::Open(0);
  if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
  if (auto nvrtc = codegen::Nvrtc::Load(); !nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status();
  const std::string model = testing::CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  if (!testing::FileExists(model)) GTEST_SKIP() << "tiny model fixture not found: " << model;
  const std::string arch = absl::StrCat("sm_", (*dev)->arch());
  auto file = gguf::GgufFile::Open(model);
  ASSERT_TRUE(file.ok()) << file.status();
  auto m = frontends::LowerModel(**file, {});
  ASSERT_TRUE(m.ok()) << m.status();
  codegen::RegisterCodegenPasses();
  passes::PassManagerOptions po;
  po.pipeline = passes::WithBucketLadder(passes::PipelineForArch(arch), "16");
  auto pm = passes::PassManager::Create(po);
  ASSERT_TRUE(pm.ok()) << pm.status();
  ASSERT_TRUE((*pm)->Run(**m).ok());
  auto plan = MakePlan(**m, **file, arch, po.pipeline, "test");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto back = ParsePlan(SerializePlan(*plan), "gpu.plan");
  ASSERT_TRUE(back.ok()) << back.status();
  auto loaded = LoadPlanModule(*back);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto pre = PrecompiledKernels(*back);
  ASSERT_TRUE(pre.ok()) << pre.status();
  ASSERT_FALSE((*pre)->empty());

  CudaExecutorOptions o;
  o.kernel_cache_dir = "-";
  o.progress = false;
  o.precompiled = *pre;
  auto file2 = gguf::GgufFile::Open(model);
  ASSERT_TRUE(file2.ok());
  auto exec = CudaExecutor::Create(**loaded, **file2, o);
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto out = (*exec)->Run("decode", {HostTensor::FromI32({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  const codegen::CompileStats& st = (*exec)->compile_stats();
  std::printf("  decode: %s\n", st.ToString().c_str());
  EXPECT_GT(st.plan_hits, 0);
  EXPECT_EQ(st.compiled, 0);
  EXPECT_EQ(st.disk_hits, 0);
}

}  // namespace
}  // namespace memra::runtime
