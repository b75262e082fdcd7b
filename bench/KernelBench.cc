// memra-kernel-bench: the one-token GEMV of decode (kernels/cuda/Gemv.cu) at the 9B preset's
// matrix shapes, per weight storage and x-staging variant, next to cuBLASLt's M = 1 product, as a
// table of time, bandwidth and % of the HBM roofline. Weights are filled with constants: the time
// of a memory-bound kernel does not depend on the values (correctness is tests/cuda/OpTable_test).
//
//   memra-kernel-bench [--iters 50] [--peak-gbs 4600]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "kernels/cuda/GemvParams.h"

#include "absl/strings/str_format.h"
#include "codegen/KernelCompiler.h"
#include "ir/DType.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"

namespace {

using namespace memra;
using runtime::cuda::CuCheck;
using runtime::cuda::CUdeviceptr;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "memra-kernel-bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

struct Shape {
  const char* what;
  int64_t n, k;
};

}  // namespace

int main(int argc, char** argv) {
  int iters = 50;
  double peak_gbs = 4600;  // streaming read measured on the H200 (shared/design/h200-measurements.md)
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iters") == 0)
      iters = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--peak-gbs") == 0)
      peak_gbs = std::atof(argv[i + 1]);
  }
  auto dev = runtime::cuda::CudaDevice::Open(0);
  if (!dev.ok()) return Fail(dev.status());
  const auto& d = (*dev)->driver();
  const auto stream = (*dev)->stream();
  codegen::CompileOptions co;
  co.arch = (*dev)->arch();
  auto compiler = codegen::KernelCompiler::Create(co);
  if (!compiler.ok()) return Fail(compiler.status());
  auto blas = runtime::cuda::CublasLt::Create();
  if (!blas.ok()) return Fail(blas.status());
  const Shape shapes[] = {{"attn/ssm out 4096x4096", 4096, 4096}, {"ffn gate|up 12288x4096", 12288, 4096},
                          {"ffn down 4096x12288", 4096, 12288},   {"ssm qkv 8192x4096", 8192, 4096},
                          {"ssm beta 32x4096", 32, 4096},         {"head 248320x4096", 248320, 4096}};
  std::printf("%s, %d iterations per row, roofline %.0f GB/s\n", (*dev)->Describe().c_str(), iters, peak_gbs);
  std::printf("%-24s %-22s %10s %10s %8s\n", "shape", "kernel", "us", "GB/s", "% roof");
  runtime::cuda::CUevent e0 = nullptr, e1 = nullptr;
  d.cuEventCreate(&e0, 0);
  d.cuEventCreate(&e1, 0);
  for (const Shape& s : shapes) {
    auto w = (*dev)->Alloc(s.n * s.k * 2, "w");  // bf16 (also holds the q8 values)
    auto sc = (*dev)->Alloc(s.n * s.k / 32 * 4, "scales");
    auto x = (*dev)->Alloc(s.k * 4, "x");
    auto xb = (*dev)->Alloc(s.k * 2, "x bf16");
    auto y = (*dev)->Alloc(s.n * 4, "y");
    for (auto* b : {&w, &sc, &x, &xb, &y})
      if (!b->ok()) return Fail(b->status());
    // bf16 1.0 pairs / f32 1.0 / q8 values 0x01: finite sums, no denormals.
    d.cuMemsetD32Async(w->ptr(), 0x3f803f80u, s.n * s.k / 2, stream);
    d.cuMemsetD32Async(sc->ptr(), 0x3c000000u, s.n * s.k / 32, stream);
    d.cuMemsetD32Async(x->ptr(), 0x3f800000u, s.k, stream);
    d.cuMemsetD32Async(xb->ptr(), 0x3f803f80u, s.k / 2, stream);
    struct Variant {
      std::string name;
      int storage, stage;  // storage 0: cuBLASLt bf16
    };
    std::vector<Variant> variants = {{"gemv bf16 x-in-smem", 2, 1},
                                     {"gemv bf16 x-via-ldg", 2, 0},
                                     {"gemv q8 x-in-smem", 3, 1},
                                     {"gemv q8 x-via-ldg", 3, 0},
                                     {"cuBLASLt bf16 M=1", 0, 0}};
    for (const Variant& v : variants) {
      runtime::cuda::CUfunction fn = nullptr;
      std::unique_ptr<runtime::cuda::LoadedModule> mod;
      if (v.storage != 0) {
        kernels::cuda::ModuleSpec m;
        m.file = "Gemv.cu";
        m.defines = kernels::cuda::MakeDefines(
            {kernels::cuda::Def("GEMV_K", s.k), kernels::cuda::Def("GEMV_W", v.storage),
             kernels::cuda::Def("GEMV_WARPS", 8), kernels::cuda::Def("GEMV_STAGE_X", v.stage)});
        auto cubin = (*compiler)->CompileAll({m});
        if (!cubin.ok()) return Fail(cubin.status());
        auto loaded = runtime::cuda::LoadedModule::Load(**dev, *(*cubin)[0], m.Key());
        if (!loaded.ok()) return Fail(loaded.status());
        mod = std::move(*loaded);
        auto f = mod->Function("gemv");
        if (!f.ok()) return Fail(f.status());
        fn = *f;
      }
      kernels::cuda::GemvParams gp;
      gp.w.w = w->ptr();
      gp.w.scale = sc->ptr();
      gp.x = x->ptr();
      gp.y = y->ptr();
      gp.n_rows = static_cast<int>(s.n);
      void* args[] = {&gp};
      auto run = [&]() -> absl::Status {
        if (v.storage == 0)
          return (*blas)->Matmul(xb->ptr(), w->ptr(), y->ptr(), 1, s.n, s.k, ir::DType::kBF16, stream);
        return CuCheck(
            d.cuLaunchKernel(fn, static_cast<unsigned>((s.n + 7) / 8), 1, 1, 256, 1, 1, 0, stream, args, nullptr),
            "gemv launch");
      };
      for (int i = 0; i < 5; ++i)
        if (absl::Status st = run(); !st.ok()) return Fail(st);
      d.cuEventRecord(e0, stream);
      for (int i = 0; i < iters; ++i)
        if (absl::Status st = run(); !st.ok()) return Fail(st);
      d.cuEventRecord(e1, stream);
      if (absl::Status st = (*dev)->Synchronize(v.name); !st.ok()) return Fail(st);
      float ms = 0;
      d.cuEventElapsedTime(&ms, e0, e1);
      const double us = 1000.0 * ms / iters;
      const double bytes = v.storage == 3 ? s.n * s.k * (1.0 + 4.0 / 32) : s.n * s.k * 2.0;
      const double gbs = bytes / (us * 1e3);
      std::printf("%-24s %-22s %10.2f %10.0f %7.1f%%\n", s.what, v.name.c_str(), us, gbs, 100 * gbs / peak_gbs);
    }
  }
  return 0;
}
