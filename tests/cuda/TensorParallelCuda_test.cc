// Tensor parallelism on GPUs (issue 21, docs/design/tensor-parallel.md).
//
// One GPU: the collectives' units (all_reduce, all_gather of one part and of row blocks) run in a
// module of one rank, first as copies (no communicator), then through an NCCL communicator of
// world size 1: the output must equal the input (poisoned outputs, so an unwritten element shows).
// Two or more GPUs (the nvidia-h200-x2 / -x4 / -x8 kinds): each tiny fixture split over 2 GPUs
// (rank r on GPU r, NCCL between them) against the same pipeline on one GPU: logits within the
// reduction-order bound and the same greedy continuation. Skips, saying why, without a GPU, with
// one GPU for the split, or without NCCL.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/SelectKernelsPass.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "ir/Parser.h"
#include "kernels/cpu/Sampling.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Executor.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/Nccl.h"
#include "tests/TinyPrompts.h"
#include "tests/cuda/CudaTestUtil.h"

namespace memra::runtime {
namespace {

int GpuCount() {
  auto d = cuda::CudaDriver::Get();
  int n = 0;
  if (!d.ok() || (*d)->cuDeviceGetCount(&n) != 0) return 0;
  return n;
}

// experts: shard-tensor-parallel's option (auto: the cost rule; expert: across the experts).
absl::Status Compile(ir::Module& m, int tp, const std::string& experts = "auto") {
  codegen::RegisterCodegenPasses();  // select-kernels lives in codegen (SelectKernelsPass.h)
  auto target = CudaDeviceTarget(0);
  if (!target.ok()) return target.status();
  passes::PassManagerOptions po;
  const std::string pipeline = passes::PipelineForTarget(target->ArchName(), target->sm_count);
  po.pipeline = tp > 1 ? absl::StrCat("shard-tensor-parallel{tp=", tp, " experts=", experts, "},", pipeline)
                       : passes::WithTensorParallel(pipeline, tp);
  auto pm = passes::PassManager::Create(po);
  if (!pm.ok()) return pm.status();
  return (*pm)->Run(m);
}

class TensorParallelCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    // The device pages: NVLink multicast off in every process started there.
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  }
};

constexpr char kCollectives[] = R"(
func @f(%x: f32[4, 8]) -> (f32[4, 8], f32[4, 8], f32[4, 8]) {
  %s = all_reduce(%x) : f32[4, 8]
  %g = all_gather(%x) {axis = 1, parts = 1} : f32[4, 8]
  %h = all_gather(%x) {axis = 0, parts = 1} : f32[4, 8]
  return %s, %g, %h
}
)";

TEST_F(TensorParallelCuda, CollectivesOfOneRank) {
  auto m = ir::ParseModule(kCollectives);
  ASSERT_TRUE(m.ok()) << m.status();
  const absl::Status compiled = Compile(**m, 1);
  ASSERT_TRUE(compiled.ok()) << compiled;
  auto file = gguf::GgufFile::Open(testing::CudaTestDataPath("models/qwen35-tiny-q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  CudaExecutorOptions o;
  o.poison_arena = true;
  auto exec = CudaExecutor::Create(**m, **file, o);
  ASSERT_TRUE(exec.ok()) << exec.status();
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * i - 3.0f;
  auto check = [&](const char* how) {
    auto out = (*exec)->Run("f", {HostTensor::FromF32(x, {4, 8})});
    ASSERT_TRUE(out.ok()) << how << ": " << out.status();
    ASSERT_EQ(out->size(), 3u);
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 32; ++i) ASSERT_EQ((*out)[k].f32()[i], x[i]) << how << ": result " << k << " element " << i;
  };
  check("copies (no communicator)");
  auto nccl = cuda::Nccl::Get();
  if (!nccl.ok()) GTEST_SKIP() << "the NCCL part needs libnccl.so.2: " << nccl.status().message();
  std::printf("NCCL %d from %s\n", (*nccl)->version(), (*nccl)->library().c_str());
  auto id = (*nccl)->UniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE((*exec)->MakeCurrent().ok());
  auto comm = cuda::NcclCommunicator::Create(*id, 1, 0);
  ASSERT_TRUE(comm.ok()) << comm.status();
  (*exec)->set_communicator(comm->get());
  check("NCCL, world size 1");
  check("NCCL, world size 1, graph replay");
}

// The loader alone needs no GPU: the library, its version, a bootstrap id.
TEST(Nccl, LoadsAndMakesABootstrapId) {
  auto nccl = cuda::Nccl::Get();
  if (!nccl.ok()) GTEST_SKIP() << nccl.status().message();
  EXPECT_GE((*nccl)->version(), 21800) << "NCCL " << (*nccl)->version() << " predates graph-capturable collectives";
  auto a = (*nccl)->UniqueId();
  auto b = (*nccl)->UniqueId();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(*a, *b);
  std::printf("NCCL %d from %s\n", (*nccl)->version(), (*nccl)->library().c_str());
}

struct Split {
  std::vector<float> prefill;
  std::vector<int32_t> greedy;
};

absl::StatusOr<Split> RunModel(const std::string& path, int tp, const std::vector<int32_t>& prompt, int steps,
                               const std::string& experts = "auto") {
  auto file = gguf::GgufFile::Open(path);
  if (!file.ok()) return file.status();
  auto m = frontends::LowerModel(**file);
  if (!m.ok()) return m.status();
  if (absl::Status s = Compile(**m, tp, experts); !s.ok()) return s;
  ExecutorOptions eo;
  eo.cuda.progress = false;
  auto exec = CreateExecutor(Backend::kCuda, **m, **file, eo);
  if (!exec.ok()) return exec.status();
  const int64_t vocab = (*m)->attrs().I64Or("n_vocab", 0);
  std::vector<HostTensor> args;
  args.push_back(HostTensor::FromI32(prompt, {static_cast<int64_t>(prompt.size())}));
  auto out = (*exec)->Run("prefill", std::move(args));
  if (!out.ok()) return out.status();
  Split s;
  const HostTensor& t = (*out)[0];
  s.prefill.assign(t.f32() + t.numel() - vocab, t.f32() + t.numel());
  const int32_t first = kernels::cpu::Argmax(s.prefill.data(), vocab);
  auto ids = (*exec)->DecodeGreedy(first, steps);
  if (!ids.ok()) return ids.status();
  s.greedy = {first};
  s.greedy.insert(s.greedy.end(), ids->begin(), ids->end());
  return s;
}

// Each model split over 2 GPUs (shard-tensor-parallel's `experts` option) against 1 GPU: the
// partial sums of the row-parallel products added by NCCL in another order (nmse bound), the same
// greedy continuation.
void ExpectTwoGpusMatchOne(const std::vector<const char*>& models, const std::string& experts,
                           const std::vector<int32_t>& prompt) {
  for (const char* name : models) {
    const std::string path = testing::CudaTestDataPath(std::string("models/") + name);
    auto one = RunModel(path, 1, prompt, 8);
    ASSERT_TRUE(one.ok()) << name << ": " << one.status();
    auto two = RunModel(path, 2, prompt, 8, experts);
    ASSERT_TRUE(two.ok()) << name << " tp=2 experts=" << experts << ": " << two.status();
    double num = 0, den = 0;
    for (size_t i = 0; i < one->prefill.size(); ++i) {
      const double e = double(two->prefill[i]) - one->prefill[i];
      num += e * e;
      den += double(one->prefill[i]) * one->prefill[i];
    }
    const double nmse = den > 0 ? num / den : num;
    std::printf("%s tp=2 (experts=%s) vs 1 GPU: nmse %.3e\n", name, experts.c_str(), nmse);
    EXPECT_LE(nmse, 1e-5) << name;
    EXPECT_EQ(two->greedy, one->greedy) << name;
  }
}

std::string TwoGpusMissing() {
  if (GpuCount() < 2)
    return absl::StrCat("splitting over GPUs needs 2 (the nvidia-h200-x2 / -x4 / -x8 kinds); this machine has ",
                        GpuCount());
  if (auto n = cuda::Nccl::Get(); !n.ok()) return std::string(n.status().message());
  return "";
}

TEST_F(TensorParallelCuda, TwoGpusMatchOne) {
  if (const std::string why = TwoGpusMissing(); !why.empty()) GTEST_SKIP() << why;
  ExpectTwoGpusMatchOne(
      {"qwen35-tiny-q8_0.gguf", "qwen35moe-tiny-q8_0.gguf", "step35-tiny-q8_0.gguf", "gemma4-tiny-q8_0.gguf"}, "auto",
      testing::ByteTokenPrompt("The quick brown fox jumps over the lazy dog."));
}

// Expert parallelism on the GPU: the MoE fixtures with the routed experts cut across the ranks
// (each GPU holds half of them; its kernels skip the other's, its result a partial sum), prefill
// (the grouped products) and decode (the GEMVs).
TEST_F(TensorParallelCuda, ExpertsAcrossTwoGpusMatchOne) {
  if (const std::string why = TwoGpusMissing(); !why.empty()) GTEST_SKIP() << why;
  ExpectTwoGpusMatchOne({"qwen35moe-tiny-q8_0.gguf", "step35-tiny-q8_0.gguf"}, "expert",
                        testing::ByteTokenPrompt("Experts on two GPUs, each its half of them."));
}

}  // namespace
}  // namespace memra::runtime
