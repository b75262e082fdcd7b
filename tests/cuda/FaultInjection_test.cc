// Injected faults on the CUDA executor (issue 20): the q8_0 tiny model loaded, prefilled, decoded
// step by step and greedily on the device while its Nth device allocation fails, for every N
// until a run needs no more; and while its Nth NVRTC compile fails. Each failure must be an error
// naming the injected fault and what was being allocated or compiled (never a crash or a wrong
// result), and once the executor is gone every byte of device memory it took must be back.
// Skips without a GPU.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"
#include "tests/cuda/CudaTestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::CudaTestDataPath;
using memra::testing::FileExists;

const std::vector<int32_t> kPrompt = {1, 87, 107, 104, 35, 116, 120, 108, 102, 110, 35, 101, 117, 114, 122, 113};

std::vector<HostTensor> Ids(const std::vector<int32_t>& ids) {
  std::vector<HostTensor> a;
  a.push_back(HostTensor::FromI32(ids, {static_cast<int64_t>(ids.size())}));
  return a;
}

class FaultInjectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = cuda::CudaDevice::Open(0);
    if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
    dev_ = std::move(*dev);  // holds the primary context between executors
    const std::string path = CudaTestDataPath("models/qwen35-tiny-q8_0.gguf");
    if (!FileExists(path)) GTEST_SKIP() << "fixture not found: " << path;
    auto f = gguf::GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    file_ = std::move(*f);
    auto m = frontends::LowerModel(*file_, {});
    ASSERT_TRUE(m.ok()) << m.status();
    module_ = std::move(*m);
    cache_ = ::testing::TempDir() + "/memra-fault-injection-cache";
  }

  size_t FreeBytes() {
    EXPECT_TRUE(dev_->MakeCurrent().ok());
    size_t free_b = 0, total_b = 0;
    dev_->driver().cuMemGetInfo(&free_b, &total_b);
    return free_b;
  }

  // Load, a prefill, two decode steps, a greedy chunk on the device: the generated ids.
  absl::StatusOr<std::vector<int32_t>> LoadAndRun(CudaExecutorOptions o) {
    o.kernel_cache_dir = o.fail_compile > 0 ? "-" : cache_;
    o.progress = false;
    auto e = CudaExecutor::Create(*module_, *file_, o);
    if (!e.ok()) return e.status();
    auto p = (*e)->Run("prefill", Ids(kPrompt));
    if (!p.ok()) return p.status();
    std::vector<int32_t> out;
    for (int32_t t : {35, 101}) {
      auto d = (*e)->Run("decode", Ids({t}));
      if (!d.ok()) return d.status();
    }
    auto g = (*e)->DecodeGreedy(117, 8);
    if (!g.ok()) return g.status();
    return *g;
  }

  std::unique_ptr<cuda::CudaDevice> dev_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ir::Module> module_;
  std::string cache_;
};

TEST_F(FaultInjectionTest, EveryDeviceAllocationFailingInTurn) {
  // A clean run first: the reference ids, and the kernels in the cache.
  auto clean = LoadAndRun({});
  ASSERT_TRUE(clean.ok()) << clean.status();
  const size_t baseline = FreeBytes();
  int failures = 0;
  for (int n = 1; n <= 500; ++n) {
    CudaExecutorOptions o;
    o.fail_device_alloc = n;
    auto r = LoadAndRun(o);
    const size_t free_now = FreeBytes();
    // The driver may keep a little for itself (page tables, the context's heap): 2 MiB.
    EXPECT_LE(baseline - std::min(baseline, free_now), size_t{2} << 20)
        << "allocation " << n << ": device memory not given back (" << (baseline - free_now) << " bytes)";
    if (r.ok()) {
      EXPECT_EQ(*r, *clean) << "allocation " << n << " never failed, yet the ids differ";
      std::printf("  %d device allocations in a load + prefill + decode, each failing in turn: %d clean errors\n",
                  n - 1, failures);
      break;
    }
    ++failures;
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find("an injected fault (device allocation " + std::to_string(n) + ")"), std::string::npos)
        << "allocation " << n << ": " << r.status();
    EXPECT_NE(msg.find(" for "), std::string::npos) << "allocation " << n << " does not say what it was for: " << msg;
    if (n <= 3 || failures % 10 == 0) std::printf("  allocation %d: %s\n", n, msg.c_str());
  }
  EXPECT_GE(failures, 5) << "a load, prefill and decode make more device allocations than that";
}

TEST_F(FaultInjectionTest, NvrtcCompilesFailingInTurn) {
  const size_t baseline = FreeBytes();
  for (int n : {1, 2, 5}) {
    CudaExecutorOptions o;
    o.fail_compile = n;
    auto r = LoadAndRun(o);
    ASSERT_FALSE(r.ok()) << "compile " << n << " was injected to fail";
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find("an injected fault (compile " + std::to_string(n) + ")"), std::string::npos) << msg;
    EXPECT_NE(msg.find(".cu<"), std::string::npos) << "the error does not name the module: " << msg;
    std::printf("  compile %d: %s\n", n, msg.c_str());
    const size_t free_now = FreeBytes();
    EXPECT_LE(baseline - std::min(baseline, free_now), size_t{2} << 20) << "compile " << n << ": memory not given back";
  }
}

// --max-device-memory: a budget below what the model needs is refused before anything is uploaded
// (naming the flag), one above it loads.
TEST_F(FaultInjectionTest, DeviceMemoryBudgetIsCheckedBeforeUpload) {
  const size_t baseline = FreeBytes();
  CudaExecutorOptions o;
  o.memory_budget = 1 << 20;
  o.kernel_cache_dir = cache_;
  o.progress = false;
  auto refused = CudaExecutor::Create(*module_, *file_, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max-device-memory"), std::string::npos) << refused.status();
  EXPECT_LE(baseline - std::min(baseline, FreeBytes()), size_t{2} << 20);
  o.memory_budget = uint64_t{4} << 30;
  auto loaded = CudaExecutor::Create(*module_, *file_, o);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
}

}  // namespace
}  // namespace memra::runtime
