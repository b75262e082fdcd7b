// Helpers of the CUDA test suites: data paths that also work from a copy of the repository
// elsewhere (the GPU machine runs the bundle from its repository root).
#pragma once

#include <cstdio>
#include <string>

#include "codegen/KernelCompiler.h"
#include "runtime/cuda/CudaDevice.h"
#include "tests/TestUtil.h"

namespace memra::testing {

// tests/data/<rel>: the configured source tree's, else ./tests/data/<rel> (cwd = repo root).
inline std::string CudaTestDataPath(const std::string& rel) {
  const std::string configured = TestDataPath(rel);
  if (FileExists(configured)) return configured;
  return "tests/data/" + rel;
}

// What a kernel test suite opens once (SetUpTestSuite): the device and an NVRTC compiler caching in
// TempDir()/<cache_name>, or why not (`skip`: no GPU, no NVRTC). Prints the device line.
struct GpuKernelEnv {
  runtime::cuda::CudaDevice* dev = nullptr;
  codegen::KernelCompiler* compiler = nullptr;
  std::string skip;
};
inline void OpenGpuKernelEnv(const std::string& cache_name, GpuKernelEnv& env) {
  auto dev = runtime::cuda::CudaDevice::Open(0);
  if (!dev.ok()) {
    env.skip = std::string(dev.status().message());
    return;
  }
  env.dev = dev->release();
  std::printf("  device: %s\n", env.dev->Describe().c_str());
  codegen::CompileOptions o;
  o.arch = env.dev->arch();
  o.cache_dir = ::testing::TempDir() + "/" + cache_name;
  auto c = codegen::KernelCompiler::Create(o);
  if (!c.ok()) {
    env.skip = std::string(c.status().message());
    return;
  }
  env.compiler = c->release();
}

}  // namespace memra::testing
