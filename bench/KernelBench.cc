// memra-kernel-bench: the one-token GEMV of decode (kernels/cuda/Gemv.cu) at the 9B and 0.8B
// presets' matrix shapes, per weight storage, block size, prefetch depth and x-staging variant,
// next to cuBLASLt's M = 1 product, as a table of time, bandwidth and % of the HBM roofline. As in
// decode: launched with programmatic dependent launch, each call on another copy of the weights
// (more than the L2 cache holds). Weights are filled with constants: the time of a memory-bound
// kernel does not depend on the values (correctness is tests/cuda/OpTable_test).
//
// The quant section: the decode GEMV on GGUF blocks (kernels/cuda/GemvQuant.cu, selected and bound
// by its units) per format at the 9B and 27B shapes, f32 x and q8 x (with and without the x
// quantization), next to cuBLASLt bf16 at the same M; GB/s of the format's weight bytes. Weights are
// quantized random rows (repeated), rotated over copies >= 4x the L2 so no call finds its weights
// cached, and each row is timed as a CUDA graph of --iters calls (decode runs as one graph).
//
//   memra-kernel-bench [--iters 50] [--peak-gbs 4600] [--section all|gemv|quant|moe|deltanet|gemm|attention]
//                      [--formats q8_0,q4_K,...] [--tokens T] [--sweep 1] [--lengths 4096,16384]
//                      [--candidates 16] [--only SHAPE]
// --formats takes every format GemvQuant.cu reads (GemvQuantReads: q8_0 ... q6_K, mxfp4, iq4_nl,
// iq4_xs); the default is all of them.
//
// The moe section: the MoE decode forms of GemvQuant.cu (the routed experts' gate/up with the
// shared expert, and the fused down with the weighted sum) at Step 3.5's, Qwen3.5-35B-A3B's and
// Gemma 4 26B-A4B's expert shapes, per format, the units' geometry and with --sweep every rows x
// stages x grid cap (--only, here and in the quant section: the shapes whose name contains SHAPE).
// Rows whose K is not a multiple of a K-quant's 256 take llama-quantize's fallback format (q4_K ->
// q5_0, q6_K -> q8_0, ...), as `memra gen` writes them.
//
// The deltanet section: the chunked gated-delta prefill scan (kernels/cuda/DeltaNetChunked.cu) at
// the 9B's and the 0.8B's delta-net shapes for each --lengths T, its two launches timed alone and
// as the pair the executor runs.
//
// The gemm section: cuBLASLt's first --candidates algorithms for the 9B's prefill products at M =
// each --lengths value, each timed, against the heuristic's first (the one memra runs).
//
// The attention section: causal gated prefill attention at the 9B's, Gemma 4 31B's full-attention
// and Step 3.5's shapes for each --lengths T: the wgmma kernel the unit selects on Hopper beside
// the mma.sync kernel it selects elsewhere, TFLOP/s and the two outputs' nmse.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/GemvParams.h"
#include "kernels/cuda/GemvQuantParams.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "codegen/KernelCompiler.h"
#include "frontends/synthetic/QuantMix.h"
#include "ir/DType.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/FixedBindContext.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/formats/Quant.h"
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

// ---- the quant section: kernels/cuda/GemvQuant.cu ----

namespace kc = kernels::cuda;
using runtime::cuda::CudaDevice;
using runtime::cuda::DeviceBuffer;
using runtime::cuda::LoadedModule;

// The type llama-quantize writes for rows of `cols` columns of `fmt` (its fallback when they are
// not a multiple of the block: Gemma 4's 704-wide q4_K downs are q5_0), as `memra gen` writes it.
ir::DType RowFormat(ir::DType fmt, int64_t cols) {
  auto t = synthetic::FallbackType(static_cast<formats::GgmlType>(ir::InfoOf(fmt).ggml_id), cols);
  if (!t.ok()) return fmt;
  return ir::DTypeFromGgmlId(static_cast<uint32_t>(*t)).value_or(fmt);
}

struct QuantShape {
  const char* what;
  int64_t n, k;
  bool swiglu;  // gate + up, N rows each
};
constexpr QuantShape kQuantShapes[] = {
    {"9B attn/ssm out 4096x4096", 4096, 4096, false},
    {"9B ffn gate|up 12288x4096", 12288, 4096, false},
    {"9B ffn swiglu 2x12288x4096", 12288, 4096, true},
    {"9B ffn down 4096x12288", 4096, 12288, false},
    {"9B head 248320x4096", 248320, 4096, false},
    {"27B ffn gate|up 17408x5120", 17408, 5120, false},
    {"27B ffn down 5120x17408", 5120, 17408, false},
    // Gemma 4 26B-A4B's dense products (hidden 2816; 16 q / 8 kv heads x 256; the shared GeGLU of
    // 2112): K = 2816 is 11 K-quant blocks (a partial chunk), the shared down's 2112 takes the
    // fallback format.
    {"G4 26B q|k|v 8192x2816", 8192, 2816, false},
    {"G4 26B attn out 2816x4096", 2816, 4096, false},
    {"G4 26B geglu 2x2112x2816", 2112, 2816, true},
    {"G4 26B shared down 2816x2112", 2816, 2112, false},
    // Gemma 4 31B (hidden 5376, ffn 21504): the down's 1,344 tiles of 4 rows fill 336 blocks, 3 an
    // SM on 72 SMs and 2 on 60 (the streamed variant's case).
    {"G4 31B attn out 5376x8192", 5376, 8192, false},
    {"G4 31B ffn down 5376x21504", 5376, 21504, false},
    {"G4 31B ffn swiglu 2x21504x5376", 21504, 5376, true},
};

// Microseconds per call of enqueue(i) (i = 0, 1, ...): a graph of `iters` calls, launched 3 times
// after a warm-up (plain stream launches when capture fails).
absl::StatusOr<double> TimeCalls(const CudaDevice& dev, int iters, const std::function<absl::Status(int)>& enqueue) {
  const auto& d = dev.driver();
  const auto stream = dev.stream();
  for (int i = 0; i < 3; ++i)
    if (absl::Status st = enqueue(i); !st.ok()) return st;
  if (absl::Status st = dev.Synchronize("warm-up"); !st.ok()) return st;
  runtime::cuda::CUgraphExec exec = nullptr;
  if (d.cuStreamBeginCapture(stream, runtime::cuda::kCuStreamCaptureModeThreadLocal) == 0) {
    absl::Status st;
    for (int i = 0; i < iters && st.ok(); ++i) st = enqueue(i);
    runtime::cuda::CUgraph graph = nullptr;
    const auto end = d.cuStreamEndCapture(stream, &graph);
    if (st.ok() && end == 0 && graph != nullptr && d.cuGraphInstantiate(&exec, graph, 0) != 0) exec = nullptr;
    if (graph != nullptr) d.cuGraphDestroy(graph);
  }
  runtime::cuda::CUevent e0 = nullptr, e1 = nullptr;
  d.cuEventCreate(&e0, 0);
  d.cuEventCreate(&e1, 0);
  constexpr int kReps = 3;
  absl::Status st;
  if (exec != nullptr) {
    st = CuCheck(d.cuGraphLaunch(exec, stream), "graph launch");
    if (st.ok()) st = dev.Synchronize("graph");
    d.cuEventRecord(e0, stream);
    for (int r = 0; r < kReps && st.ok(); ++r) st = CuCheck(d.cuGraphLaunch(exec, stream), "graph launch");
    d.cuEventRecord(e1, stream);
  } else {
    d.cuEventRecord(e0, stream);
    for (int i = 0; i < kReps * iters && st.ok(); ++i) st = enqueue(i);
    d.cuEventRecord(e1, stream);
  }
  if (st.ok()) st = dev.Synchronize("timed calls");
  float ms = 0;
  d.cuEventElapsedTime(&ms, e0, e1);
  d.cuEventDestroy(e0);
  d.cuEventDestroy(e1);
  if (exec != nullptr) d.cuGraphExecDestroy(exec);
  if (!st.ok()) return st;
  return 1000.0 * ms / (kReps * iters);
}

using LoadedModules = std::map<std::string, std::unique_ptr<LoadedModule>>;

// The distinct modules of `mods`, compiled in one parallel batch and loaded, by key.
absl::StatusOr<LoadedModules> CompileAndLoad(const CudaDevice& dev, codegen::KernelCompiler& compiler,
                                             std::vector<kc::ModuleSpec> mods) {
  std::sort(mods.begin(), mods.end());
  mods.erase(std::unique(mods.begin(), mods.end(),
                         [](const kc::ModuleSpec& a, const kc::ModuleSpec& b) { return a.Key() == b.Key(); }),
             mods.end());
  MEMRA_ASSIGN_OR_RETURN(auto cubins, compiler.CompileAll(mods));
  LoadedModules loaded;
  for (size_t i = 0; i < mods.size(); ++i) {
    MEMRA_ASSIGN_OR_RETURN(auto l, LoadedModule::Load(dev, *cubins[i], mods[i].Key()));
    loaded[mods[i].Key()] = std::move(l);
  }
  return loaded;
}

// Copies of a [rows, cols] matrix of `dtype` (quantized random rows, repeated), enough of them
// that the copies together are >= 4x the L2.
absl::StatusOr<std::vector<DeviceBuffer>> QuantCopies(const CudaDevice& dev, ir::DType dtype, int64_t rows,
                                                      int64_t cols, int64_t min_total) {
  const int64_t rb = *ir::StorageBytes(dtype, cols);
  const int64_t bytes = rb * rows;
  const int64_t copies = std::clamp<int64_t>((min_total + bytes - 1) / bytes, 1, 64);
  const int64_t seed_rows = std::min<int64_t>(rows, 64);
  std::vector<float> v(static_cast<size_t>(seed_rows * cols));
  std::mt19937 rng(static_cast<uint32_t>(rows * 31 + cols));
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (float& x : v) x = nd(rng);
  std::vector<uint8_t> blocks(static_cast<size_t>(seed_rows * rb));
  const auto type = static_cast<formats::GgmlType>(ir::InfoOf(dtype).ggml_id);
  if (ir::IsQuantized(dtype)) {
    if (absl::Status st = formats::Quantize(type, v, absl::MakeSpan(blocks)); !st.ok()) return st;
  } else {
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t b = formats::FloatToBf16(v[i]);
      std::memcpy(blocks.data() + 2 * i, &b, 2);
    }
  }
  std::vector<DeviceBuffer> out;
  for (int64_t c = 0; c < copies; ++c) {
    // 16 spare bytes: GemvQuant.cu's realigned copies read up to 15 past a matrix (as the executor allocates).
    auto b = dev.Alloc(static_cast<size_t>(bytes + 16), "weights");
    if (!b.ok()) return b.status();
    if (absl::Status st = dev.Upload(b->ptr(), blocks.data(), blocks.size()); !st.ok()) return st;
    for (int64_t have = seed_rows * rb; have < bytes; have *= 2)  // repeat the rows on the device
      if (absl::Status st = CuCheck(
              dev.driver().cuMemcpyDtoDAsync(b->ptr() + have, b->ptr(), std::min(have, bytes - have), dev.stream()),
              "copy");
          !st.ok())
        return st;
    out.push_back(std::move(*b));
  }
  if (absl::Status st = dev.Synchronize("weights"); !st.ok()) return st;
  return out;
}

// The one-op module of a shape: matmul (or matmul_swiglu) of T tokens through `fmt` weights.
absl::StatusOr<std::unique_ptr<ir::Module>> QuantOpModule(const QuantShape& sh, ir::DType fmt, int64_t T) {
  const std::string dn(ir::DTypeName(fmt));
  std::string text = absl::StrCat("weight @g : ", dn, "[", sh.n, ", ", sh.k, "]\n");
  if (sh.swiglu) absl::StrAppend(&text, "weight @u : ", dn, "[", sh.n, ", ", sh.k, "]\n");
  absl::StrAppend(&text, "func @f(%x: f32[", T, ", ", sh.k, "]) -> (f32[", T, ", ", sh.n,
                  "]) {\n  %y = ", sh.swiglu ? "matmul_swiglu(%x, @g, @u)" : "matmul(%x, @g)", " : f32[", T, ", ", sh.n,
                  "]\n  return %y\n}\n");
  return ir::ParseModule(text);
}

struct QuantVariant {
  std::string name;
  kc::GemvQuantOptions o;
  bool product_only;  // q8 x: the products only (x quantized once beforehand)
};
// f32 x and q8 x as the units select them (+ q8 products only), and with --sweep q8 x at every
// rows x stages x grid geometry (grid: the units' one, or capped at 4 or 8 blocks per SM so each
// warp streams many tiles through one ring).
std::vector<QuantVariant> QuantVariants(ir::DType fmt, bool sweep, int sm_count, int64_t T) {
  const std::string dn(ir::DTypeName(fmt));
  std::vector<QuantVariant> variants;
  for (kc::GemvQuantX xp : {kc::GemvQuantX::kF32, kc::GemvQuantX::kQ8, kc::GemvQuantX::kQ8Block}) {
    const char* xn = xp == kc::GemvQuantX::kF32 ? "f32-x" : xp == kc::GemvQuantX::kQ8 ? "q8-x" : "q8-x-block";
    struct Geometry {
      int rows, stages, blocks_per_sm;
    };
    std::vector<Geometry> geoms = {{0, 0, 0}};
    if (sweep && xp == kc::GemvQuantX::kQ8)
      for (int r : {1, 2, 4})
        for (int st : {2, 3, 4})
          for (int b : {0, 4, 8}) geoms.push_back({r, st, b});
    for (const Geometry& g : geoms) {
      kc::GemvQuantOptions o;
      o.x = xp;
      o.rows = g.rows;
      o.stages = g.stages;
      o.max_blocks = g.blocks_per_sm * sm_count;
      const std::string gn = g.rows
                                 ? absl::StrCat(" R=", g.rows, " ST=", g.stages,
                                                g.blocks_per_sm ? absl::StrCat(" grid=", g.blocks_per_sm, "/SM") : "")
                                 : "";
      variants.push_back({absl::StrCat(dn, " ", xn, gn), o, false});
      if (xp == kc::GemvQuantX::kQ8 && !g.rows) variants.push_back({absl::StrCat(dn, " q8-x products only"), o, true});
    }
  }
  // The units' q8-x geometry with the items streamed over every resident warp (GQ_STREAM; not the
  // units' default): where it can run, and where the balance rule would pick it.
  for (int stream : {2, 1}) {
    kc::GemvQuantOptions o;
    o.x = kc::GemvQuantX::kQ8;
    o.stream = stream;
    variants.push_back({absl::StrCat(dn, stream == 2 ? " q8-x streamed" : " q8-x streamed if uneven"), o, false});
  }
  // The units' q8-x geometry built for 5 or 6 resident blocks an SM (GQ_MINB caps the registers; a
  // grid capped at the resident blocks takes that many: select-kernels{gemv-q-blocks-per-sm}).
  for (int b : {5, 6}) {
    kc::GemvQuantOptions o;
    o.x = kc::GemvQuantX::kQ8;
    o.min_blocks = b;
    variants.push_back({absl::StrCat(dn, " q8-x ", b, " blocks/SM"), o, false});
  }
  // The q4_K / q5_K products run by run (GQ_PAIR_DOT=0: the form before session 42's pair dot, the
  // units' default now), at the units' q8-x geometry.
  if (fmt == ir::DType::kQ4_K || fmt == ir::DType::kQ5_K) {
    kc::GemvQuantOptions o;
    o.x = kc::GemvQuantX::kQ8;
    o.pair_dot = false;
    variants.push_back({absl::StrCat(dn, " q8-x runs one by one"), o, false});
  }
  // q4_K / q5_K's scales unpacked by one form (GQ_SCALES=1: the same sums; the 31B down's 116
  // registers become 72), at the units' geometry and at 6 blocks an SM, which it leaves room for.
  if (fmt == ir::DType::kQ4_K || fmt == ir::DType::kQ5_K)
    for (int b : {0, 6}) {
      kc::GemvQuantOptions o;
      o.x = kc::GemvQuantX::kQ8;
      o.one_scale_form = true;
      o.min_blocks = b;
      variants.push_back({absl::StrCat(dn, " q8-x one scale form", b ? " 6 blocks/SM" : ""), o, false});
    }
  // Blocks of one warp, as many warps an SM as the K-quants' 4 blocks of 4 (a grid of 16 an SM): the
  // same tiles and rings, balanced over the SMs by the block scheduler at a finer grain (the 31B's
  // 1,344 down tiles: 10 or 11 an SM instead of 2 or 3 blocks of 4).
  {
    kc::GemvQuantOptions o;
    o.x = kc::GemvQuantX::kQ8;
    o.warps = 1;
    o.max_blocks = 16 * sm_count;
    variants.push_back({absl::StrCat(dn, " q8-x 1 warp a block"), o, false});
  }
  // q8 x loaded before each chunk's weight wait (GQ_XPRE, one token; not the units' default), with
  // x quantized by its own launch and staged per block.
  for (kc::GemvQuantX xp : {kc::GemvQuantX::kQ8, kc::GemvQuantX::kQ8Block}) {
    if (T != 1) break;
    kc::GemvQuantOptions o;
    o.x = xp;
    o.x_early = true;
    variants.push_back({absl::StrCat(dn, xp == kc::GemvQuantX::kQ8 ? " q8-x early" : " q8-x-block early"), o, false});
  }
  // x staged per block (no quantizing launch) at the q8-x units' geometry for this format (4 warps, its
  // rows a tile, 2 stages, its grid cap) instead of kQ8Block's 8 warps at 2 blocks an SM: whether the launch
  // the product spares outweighs each block reading x (the decode steps' quantize launches: 181 of the
  // Gemma 4 26B-A4B's 620, session 33).
  if (T == 1) {
    kc::GemvQuantOptions o;
    o.x = kc::GemvQuantX::kQ8Block;
    o.warps = 4;
    o.rows = fmt == ir::DType::kQ4_K || fmt == ir::DType::kQ5_K || fmt == ir::DType::kQ6_K ? 4 : 2;
    o.stages = 2;
    o.max_blocks = 4 * sm_count;
    variants.push_back({absl::StrCat(dn, " q8-x-block 4 warps R=", o.rows, " ST=2 grid=4/SM"), o, false});
  }
  return variants;
}

int RunQuantSection(const CudaDevice& dev, codegen::KernelCompiler& compiler, runtime::cuda::CublasLt& blas, int iters,
                    double peak_gbs, const std::vector<ir::DType>& formats, int64_t T, bool sweep,
                    const std::string& only = "") {
  auto skipped = [&](const QuantShape& sh) {
    return !only.empty() && std::string(sh.what).find(only) == std::string::npos;
  };
  const auto& d = dev.driver();
  const auto stream = dev.stream();
  const kc::Target target = dev.target();
  const int64_t min_total = 4 * (target.l2_bytes > 0 ? target.l2_bytes : (50 << 20));
  std::map<std::string, std::unique_ptr<LoadedModule>> modules;
  std::printf("\nGemvQuant.cu (weights as GGUF blocks), T = %ld, CUDA graphs of %d calls, roofline %.0f GB/s\n",
              static_cast<long>(T), iters, peak_gbs);
  std::printf("%-28s %-6s %7s | %-16s | %-16s | %-16s | %-16s | %s\n", "shape", "weight", "MB", "f32-x us  %roof",
              "q8-x us  %roof", "q8 prod us %roof", "q8-blk us %roof", "bf16 us / best us");
  {  // every module of the table, compiled in one parallel batch
    std::vector<kc::ModuleSpec> mods;
    for (const QuantShape& sh : kQuantShapes)
      for (ir::DType f : formats) {
        if (skipped(sh)) continue;
        const ir::DType fmt = RowFormat(f, sh.k);
        auto m = QuantOpModule(sh, fmt, T);
        if (!m.ok()) return Fail(m.status());
        const ir::Op& op = *(*m)->function("f")->Ops().front();
        auto shapes = kc::ShapesAt(op, T, kc::WeightMode::kBlocks);
        if (!shapes.ok()) return Fail(shapes.status());
        for (const QuantVariant& v : QuantVariants(fmt, sweep, target.sm_count, T))
          if (auto sel = kc::SelectGemvQuant(op, *shapes, target, v.o))
            for (const kc::Launch& l : sel->launches) mods.push_back(l.kernel.module);
      }
    std::sort(mods.begin(), mods.end());
    mods.erase(std::unique(mods.begin(), mods.end(),
                           [](const kc::ModuleSpec& a, const kc::ModuleSpec& b) { return a.Key() == b.Key(); }),
               mods.end());
    auto cubins = compiler.CompileAll(mods);
    if (!cubins.ok()) return Fail(cubins.status());
    for (size_t i = 0; i < mods.size(); ++i) {
      auto l = LoadedModule::Load(dev, *(*cubins)[i], mods[i].Key());
      if (!l.ok()) return Fail(l.status());
      modules[mods[i].Key()] = std::move(*l);
    }
    std::printf("(%zu kernel modules: %s)\n", mods.size(), compiler.stats().ToString().c_str());
  }
  for (const QuantShape& sh : kQuantShapes) {
    if (skipped(sh)) continue;
    const int nw = sh.swiglu ? 2 : 1;
    auto x = dev.Alloc(static_cast<size_t>(T * sh.k * 4), "x");
    auto xb = dev.Alloc(static_cast<size_t>(T * sh.k * 2), "x bf16");
    auto y = dev.Alloc(static_cast<size_t>(T * sh.n * 4 * nw), "y");
    for (auto* b : {&x, &xb, &y})
      if (!b->ok()) return Fail(b->status());
    d.cuMemsetD32Async(x->ptr(), 0x3f800000u, T * sh.k, stream);
    d.cuMemsetD32Async(xb->ptr(), 0x3f803f80u, T * sh.k / 2, stream);
    // cuBLASLt bf16 at the same M (swiglu: the two GEMMs).
    double bf16_us = 0;
    {
      auto copies = QuantCopies(dev, ir::DType::kBF16, sh.n, sh.k, min_total);
      if (!copies.ok()) return Fail(copies.status());
      const size_t nc = copies->size();
      auto us = TimeCalls(dev, iters, [&](int i) -> absl::Status {
        for (int w = 0; w < nw; ++w) {
          const auto& c = (*copies)[(static_cast<size_t>(i) * nw + w) % nc];
          if (absl::Status st =
                  blas.Matmul(xb->ptr(), c.ptr(), y->ptr() + w * T * sh.n * 4, T, sh.n, sh.k, ir::DType::kBF16, stream);
              !st.ok())
            return st;
        }
        return absl::OkStatus();
      });
      if (!us.ok()) return Fail(us.status());
      bf16_us = *us;
      const double bytes = 2.0 * sh.n * sh.k * nw;
      std::printf("%-28s %-6s %7.1f | cuBLASLt M=%ld: %.2f us, %.0f GB/s, %.1f%%\n", sh.what, "bf16", bytes / 1e6,
                  static_cast<long>(T), *us, bytes / (*us * 1e3), 100 * bytes / (*us * 1e3) / peak_gbs);
    }
    for (ir::DType f : formats) {
      const ir::DType fmt = RowFormat(f, sh.k);  // a K-quant's fallback where K is not a multiple of 256
      const std::string dn(ir::DTypeName(fmt));
      auto m = QuantOpModule(sh, fmt, T);
      if (!m.ok()) return Fail(m.status());
      const ir::Op& op = *(*m)->function("f")->Ops().front();
      auto shapes = kc::ShapesAt(op, T, kc::WeightMode::kBlocks);
      if (!shapes.ok()) return Fail(shapes.status());
      const int64_t wbytes = *ir::StorageBytes(fmt, sh.k) * sh.n;
      std::vector<std::vector<DeviceBuffer>> w;
      for (int i = 0; i < nw; ++i) {
        auto c = QuantCopies(dev, fmt, sh.n, sh.k, min_total / nw);
        if (!c.ok()) return Fail(c.status());
        w.push_back(std::move(*c));
      }
      const size_t nc = w[0].size();
      const std::vector<QuantVariant> variants = QuantVariants(fmt, sweep, target.sm_count, T);
      const double bytes = static_cast<double>(wbytes) * nw;
      std::vector<double> times(variants.size(), 0.0);  // 0: not selected
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        const QuantVariant& v = variants[vi];
        auto sel = kc::SelectGemvQuant(op, *shapes, target, v.o);
        if (!sel) continue;
        // A variant the selection could not honour (x staged per block that does not fit, items
        // that cannot stream, no early x past one token) is left blank, not timed under its name.
        const std::string key = sel->launches.back().kernel.module.Key();
        if ((v.o.x == kc::GemvQuantX::kQ8Block && key.find("GQ_XQ=2") == std::string::npos) ||
            (v.o.stream == 2 && key.find("GQ_STREAM=1") == std::string::npos) ||
            (v.o.x_early && key.find("GQ_XPRE=1") == std::string::npos))
          continue;
        std::vector<kc::ModuleSpec> mods;
        for (const kc::Launch& l : sel->launches)
          if (!modules.count(l.kernel.module.Key())) mods.push_back(l.kernel.module);
        if (!mods.empty()) {
          auto cubins = compiler.CompileAll(mods);
          if (!cubins.ok()) return Fail(cubins.status());
          for (size_t i = 0; i < mods.size(); ++i) {
            auto l = LoadedModule::Load(dev, *(*cubins)[i], mods[i].Key());
            if (!l.ok()) return Fail(l.status());
            modules[mods[i].Key()] = std::move(*l);
          }
        }
        DeviceBuffer scratch;
        if (sel->scratch_bytes > 0) {
          auto b = dev.Alloc(static_cast<size_t>(sel->scratch_bytes), "scratch");
          if (!b.ok()) return Fail(b.status());
          scratch = std::move(*b);
        }
        // One bound call per copy of the weights.
        struct Call {
          runtime::cuda::CUfunction fn;
          const kc::Launch* l;
          kc::ParamBlock params;
        };
        std::vector<std::vector<Call>> calls(nc);
        const kc::GpuOpImpl* unit = kc::FindGpuOpImpl(sh.swiglu ? "gemv_q_swiglu" : "gemv_q");
        for (size_t c = 0; c < nc; ++c) {
          std::vector<kc::DeviceMatrix> mats;
          for (int i = 0; i < nw; ++i) {
            kc::DeviceMatrix dm;
            dm.data = w[i][c].ptr();
            dm.rows = sh.n;
            dm.cols = sh.k;
            dm.stored = fmt;
            dm.bytes = wbytes;
            mats.push_back(dm);
          }
          kc::FixedBindContext ctx(op, *sel, *shapes, x->ptr(), /*x_rows=*/-1, mats, {y->ptr()}, scratch.ptr());
          kc::DeviceWork work;
          if (absl::Status st = unit->Bind(ctx, work); !st.ok()) return Fail(st);
          for (const kc::DeviceAction& a : work.actions()) {
            const auto& k = std::get<kc::KernelCall>(a);
            const kc::Launch& l = sel->launches[k.launch];
            if (v.product_only && l.kernel.entry == "gemv_q_quantize_x") {
              if (c == 0) {  // the quantized x the products read, once
                void* args[] = {const_cast<unsigned char*>(k.params.bytes.data())};
                auto fn = modules.at(l.kernel.module.Key())->Function(l.kernel.entry);
                if (!fn.ok()) return Fail(fn.status());
                d.cuLaunchKernel(*fn, l.grid, 1, 1, l.block, 1, 1, l.smem, stream, args, nullptr);
              }
              continue;
            }
            auto fn = modules.at(l.kernel.module.Key())->Function(l.kernel.entry);
            if (!fn.ok()) return Fail(fn.status());
            calls[c].push_back({*fn, &l, k.params});
          }
        }
        auto us = TimeCalls(dev, iters, [&](int i) -> absl::Status {
          for (Call& call : calls[static_cast<size_t>(i) % nc]) {
            void* args[] = {call.params.bytes.data()};
            if (absl::Status st = CuCheck(d.cuLaunchKernel(call.fn, call.l->grid, 1, 1, call.l->block, 1, 1,
                                                           call.l->smem, stream, args, nullptr),
                                          call.l->kernel.ToString());
                !st.ok())
              return st;
          }
          return absl::OkStatus();
        });
        if (!us.ok()) return Fail(us.status());
        times[vi] = *us;
      }
      // The units' f32-x, q8-x, q8 products and q8-x-block on one line; the sweep's geometries below.
      auto cell = [&](double us) {
        return us > 0 ? absl::StrFormat("%8.2f %6.1f%%", us, 100 * bytes / (us * 1e3) / peak_gbs)
                      : std::string("     n/a        ");
      };
      double best = 0;
      for (size_t vi = 0; vi < variants.size(); ++vi)
        if (times[vi] > 0 && !variants[vi].product_only && (best == 0 || times[vi] < best)) best = times[vi];
      // The first four plain variants (f32-x, q8-x, q8 products, q8-x-block) fill the columns; every
      // other variant (a geometry, streamed items, early x) gets a line of its own.
      std::vector<double> picked(4, 0.0);
      std::vector<bool> in_columns(variants.size(), false);
      for (size_t vi = 0, j = 0; vi < variants.size() && j < 4; ++vi)
        if (variants[vi].o.rows == 0 && variants[vi].o.stream == 0 && !variants[vi].o.x_early) {
          picked[j++] = times[vi];
          in_columns[vi] = true;
        }
      std::printf("%-28s %-6s %7.1f | %s | %s | %s | %s | %.2f\n", sh.what, dn.c_str(), bytes / 1e6,
                  cell(picked[0]).c_str(), cell(picked[1]).c_str(), cell(picked[2]).c_str(), cell(picked[3]).c_str(),
                  best > 0 ? bf16_us / best : 0.0);
      for (size_t vi = 0; vi < variants.size(); ++vi)
        if (!in_columns[vi]) std::printf("%-28s   %-32s %s\n", "", variants[vi].name.c_str(), cell(times[vi]).c_str());
    }
  }
  return 0;
}

// ---- the moe section: the routed experts' decode products (GemvQuant.cu's MoE forms) ----

// A MoE layer's decode shape: hidden K, E experts of width F (k chosen per token), a shared expert
// of width Fs (0: none).
struct MoeShape {
  const char* what;
  int64_t K, F, E, k, Fs;
};
constexpr MoeShape kMoeShapes[] = {
    {"Step 3.5 (4096; 288 x 1280, k 8; shared 1280)", 4096, 1280, 288, 8, 1280},
    {"Qwen3.5-35B-A3B (2048; 256 x 512, k 8; shared 512)", 2048, 512, 256, 8, 512},
    {"Gemma 4 26B-A4B (2816; 128 x 704, k 8)", 2816, 704, 128, 8, 0},
};

// The gate/up launch (gemv_q_moe_swiglu, with the shared expert's rows) and the down launch
// (gemv_q_moe_down, the weighted sum over the choices and the shared down) of one token, as the
// moe decode unit (Moe.cc) selects them and, with --sweep, at every rows x stages x grid geometry;
// and the down unfused (gemv_q_moe: a row of o per slot, which moe_combine then sums: its launch is
// not timed here); each timed alone as a CUDA graph of --iters calls whose choices rotate over 16 random sets (so the
// experts' bytes come from HBM, not L2), x and h quantized once beforehand. GB/s counts the bytes
// the call reads: the chosen experts' slices and the shared expert.
int RunMoeSection(const CudaDevice& dev, codegen::KernelCompiler& compiler, int iters, double peak_gbs,
                  const std::vector<ir::DType>& formats, bool sweep, const std::string& only) {
  const auto& d = dev.driver();
  const auto stream = dev.stream();
  const kc::Target target = dev.target();
  struct Geometry {
    int rows, stages, blocks_per_sm;
    int pack = 0;        // the down form's GQ_PACK (0: the unit's choice)
    int split = 0;       // the down form's GQ_SPLIT: 1 off, 2 on (0: the unit's choice)
    int min_blocks = 0;  // GQ_MINB (0: the unit's choice)
  };
  std::vector<Geometry> geoms = {{0, 0, 0}, {0, 0, 0, 1}, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 2}};
  if (sweep) {
    for (int r : {1, 2, 4})
      for (int st : {2, 3, 4})
        for (int b : {0, 2, 4, 8}) geoms.push_back({r, st, b});
    // Registers capped for more resident blocks (the unit's stages: no more than a warp's items).
    for (int r : {0, 1, 2, 4})
      for (int mb : {4, 6, 8}) geoms.push_back({r, 0, 0, 0, 0, mb});
  }
  auto options_of = [&](const Geometry& g) {
    kc::GemvQuantOptions o;
    o.rows = g.rows;
    o.stages = g.stages;
    o.max_blocks = g.blocks_per_sm * target.sm_count;
    o.pack = g.pack;
    o.split = g.split;
    o.min_blocks = g.min_blocks;
    return o;
  };
  auto name_of = [](const Geometry& g) {
    if (g.min_blocks > 0)
      return absl::StrCat(g.rows ? absl::StrCat("R=", g.rows) : std::string("unit's R"), " minblocks=", g.min_blocks);
    return g.rows ? absl::StrCat("R=", g.rows, " ST=", g.stages,
                                 g.blocks_per_sm ? absl::StrCat(" grid=", g.blocks_per_sm, "/SM") : "")
                  : std::string(g.pack == 1    ? "unit's, down unpacked"
                                : g.split == 1 ? "unit's, down not split"
                                : g.split == 2 ? "unit's, down split"
                                               : "unit's choice");
  };
  std::printf("\nGemvQuant.cu MoE decode forms, T = 1, CUDA graphs of %d calls, roofline %.0f GB/s\n", iters, peak_gbs);
  constexpr int kSets = 16;
  std::mt19937 rng(7);
  for (const MoeShape& sh : kMoeShapes)
    for (ir::DType fmt : formats) {
      if (!only.empty() && std::string(sh.what).find(only) == std::string::npos) continue;
      const ir::DTypeInfo& info = ir::InfoOf(fmt);
      // The down rows (F columns) in llama-quantize's fallback format when F is not a multiple of
      // the block (Gemma 4 26B-A4B's F = 704: a Q4_K_M file's q4_K downs are q5_0).
      const ir::DType dfmt = RowFormat(fmt, sh.F);
      const ir::DTypeInfo& dinfo = ir::InfoOf(dfmt);
      if (sh.K % info.block_elems != 0 || sh.F % dinfo.block_elems != 0 || (sh.Fs % dinfo.block_elems) != 0) {
        std::printf("%-52s %-6s (K, F or Fs not a multiple of the block: skipped)\n", sh.what,
                    std::string(info.name).c_str());
        continue;
      }
      const bool shared = sh.Fs > 0;
      const int64_t S = sh.k, h_rows = S + (shared ? 1 : 0);
      const int64_t rb_k = *ir::StorageBytes(fmt, sh.K), rb_f = *ir::StorageBytes(dfmt, sh.F);
      // Weights: the gate, up and down stacks, the shared expert; one copy each (16 sets of k
      // choices among E experts touch far more than the L2 holds).
      auto gate = QuantCopies(dev, fmt, sh.E * sh.F, sh.K, 0);
      auto up = QuantCopies(dev, fmt, sh.E * sh.F, sh.K, 0);
      auto down = QuantCopies(dev, dfmt, sh.E * sh.K, sh.F, 0);
      if (!gate.ok() || !up.ok() || !down.ok())
        return Fail(!gate.ok() ? gate.status() : !up.ok() ? up.status() : down.status());
      std::vector<DeviceBuffer> sg, su, sd;
      if (shared) {
        auto a = QuantCopies(dev, fmt, sh.Fs, sh.K, 0);
        auto b = QuantCopies(dev, fmt, sh.Fs, sh.K, 0);
        auto c = QuantCopies(dev, dfmt, sh.K, sh.Fs, 0);
        if (!a.ok() || !b.ok() || !c.ok()) return Fail(!a.ok() ? a.status() : !b.ok() ? b.status() : c.status());
        sg = std::move(*a), su = std::move(*b), sd = std::move(*c);
      }
      auto x = dev.Alloc(static_cast<size_t>(sh.K * 4), "x");
      auto g = dev.Alloc(static_cast<size_t>(sh.K * 4), "shared gate");
      auto xq = dev.Alloc(static_cast<size_t>(kc::GemvQuantXBytes(1, sh.K)), "xq");
      auto h = dev.Alloc(static_cast<size_t>(h_rows * sh.F * 4), "h");
      auto hq = dev.Alloc(static_cast<size_t>(kc::GemvQuantXBytes(h_rows, sh.F)), "hq");
      auto y = dev.Alloc(static_cast<size_t>(sh.K * 4), "y");
      auto gv = dev.Alloc(256, "gate value");
      auto ids = dev.Alloc(static_cast<size_t>(kSets * S * 4), "ids");
      auto wts = dev.Alloc(static_cast<size_t>(kSets * S * 4), "wts");
      auto o = dev.Alloc(static_cast<size_t>(h_rows * sh.K * 4), "o");
      for (auto* b : {&x, &g, &xq, &h, &hq, &y, &gv, &ids, &wts, &o})
        if (!b->ok()) return Fail(b->status());
      d.cuMemsetD32Async(x->ptr(), 0x3f800000u, sh.K, stream);
      d.cuMemsetD32Async(g->ptr(), 0x3c000000u, sh.K, stream);
      d.cuMemsetD32Async(h->ptr(), 0x3f000000u, h_rows * sh.F, stream);
      d.cuMemsetD32Async(wts->ptr(), 0x3e000000u, kSets * S, stream);
      std::vector<int32_t> chosen;
      for (int s = 0; s < kSets; ++s) {
        std::vector<int32_t> all(static_cast<size_t>(sh.E));
        for (int32_t e = 0; e < sh.E; ++e) all[static_cast<size_t>(e)] = e;
        std::shuffle(all.begin(), all.end(), rng);
        chosen.insert(chosen.end(), all.begin(), all.begin() + S);
      }
      if (absl::Status st = dev.Upload(ids->ptr(), chosen.data(), chosen.size() * 4); !st.ok()) return Fail(st);

      // Every launch of the table, compiled in one batch.
      struct Pair {
        Geometry g;
        std::optional<kc::Launch> gu, dn, un;  // un: the down unfused (gemv_q_moe, then moe_combine)
      };
      std::vector<Pair> pairs;
      for (const Geometry& geo : geoms)
        pairs.push_back(
            {geo, kc::GemvQuantMoeLaunch(target, fmt, sh.K, 1, true, S, sh.F, shared ? 1 : 0, sh.Fs, options_of(geo)),
             kc::GemvQuantMoeDownLaunch(target, dfmt, sh.F, h_rows, 1, sh.K, options_of(geo)),
             kc::GemvQuantMoeLaunch(target, dfmt, sh.F, h_rows, false, S, sh.K, shared ? 1 : 0, sh.K,
                                    options_of(geo))});
      const kc::Launch lx = kc::GemvQuantXLaunch(target, sh.K, 1), lh = kc::GemvQuantXLaunch(target, sh.F, h_rows);
      std::vector<kc::ModuleSpec> mods = {lx.kernel.module, lh.kernel.module};
      for (const Pair& p : pairs)
        for (const auto* l : {&p.gu, &p.dn, &p.un})
          if (*l) mods.push_back((*l)->kernel.module);
      auto loaded = CompileAndLoad(dev, compiler, std::move(mods));
      if (!loaded.ok()) return Fail(loaded.status());
      const LoadedModules& modules = *loaded;
      auto launch = [&](const kc::Launch& l, const auto& params) -> absl::Status {
        auto fn = modules.at(l.kernel.module.Key())->Function(l.kernel.entry);
        if (!fn.ok()) return fn.status();
        auto p = params;
        void* args[] = {&p};
        return CuCheck(runtime::cuda::LaunchKernel(d, *fn, l.grid, l.block, l.smem, stream, args, /*programmatic=*/true,
                                                   /*cluster=*/1),
                       l.kernel.ToString());
      };
      kc::GemvQuantXParams qx{};
      qx.x = x->ptr(), qx.xq = xq->ptr(), qx.n_tok = 1;
      kc::GemvQuantXParams qh{};
      qh.x = h->ptr(), qh.xq = hq->ptr(), qh.n_tok = static_cast<int>(h_rows);
      for (auto [l, q] : {std::pair{&lx, &qx}, std::pair{&lh, &qh}})
        if (absl::Status st = launch(*l, *q); !st.ok()) return Fail(st);
      kc::GemvQuantMoeParams gu{};
      gu.w0 = (*gate)[0].ptr(), gu.w1 = (*up)[0].ptr(), gu.y = h->ptr(), gu.x = x->ptr(), gu.xq = xq->ptr();
      gu.expert_bytes = sh.F * rb_k, gu.n = static_cast<int>(sh.F), gu.n_slots = static_cast<int>(S);
      gu.k = static_cast<int>(sh.k), gu.n_tok = 1, gu.n_experts = gu.n_routed = static_cast<int>(sh.E);
      if (shared) {
        gu.s0 = sg[0].ptr(), gu.s1 = su[0].ptr(), gu.ys = h->ptr() + S * sh.F * 4, gu.ns = static_cast<int>(sh.Fs);
        gu.g = g->ptr(), gu.gate = gv->ptr();
      }
      kc::GemvQuantMoeParams dn{};
      dn.w0 = (*down)[0].ptr(), dn.y = y->ptr(), dn.x = h->ptr(), dn.xq = hq->ptr();
      dn.expert_bytes = sh.K * rb_f, dn.n = static_cast<int>(sh.K), dn.n_slots = static_cast<int>(S);
      dn.k = static_cast<int>(sh.k), dn.n_tok = 1, dn.n_experts = dn.n_routed = static_cast<int>(sh.E);
      if (shared) dn.s0 = sd[0].ptr(), dn.gate = gv->ptr(), dn.xs0 = static_cast<int>(S);
      kc::GemvQuantMoeParams un = dn;  // the unfused down: o rows per slot (x row = slot), the shared row below
      un.y = o->ptr(), un.k = 1, un.gate = 0, un.wts = 0;
      if (shared) un.ys = o->ptr() + S * sh.K * 4, un.ns = static_cast<int>(sh.K);
      const double gu_bytes = static_cast<double>((2 * S * sh.F + 2 * sh.Fs) * rb_k);
      const double dn_bytes =
          static_cast<double>(S * sh.K * rb_f + (shared ? sh.K * *ir::StorageBytes(dfmt, sh.Fs) : 0));
      auto time_one = [&](const kc::Launch& l, kc::GemvQuantMoeParams p) -> absl::StatusOr<double> {
        return TimeCalls(dev, iters, [&](int i) {
          p.ids = ids->ptr() + static_cast<uint64_t>((i % kSets) * S * 4);
          p.wts = wts->ptr() + static_cast<uint64_t>((i % kSets) * S * 4);
          return launch(l, p);
        });
      };
      auto cell = [&](double us, double bytes) {
        return us > 0 ? absl::StrFormat("%8.2f us %6.0f GB/s %5.1f%%", us, bytes / (us * 1e3),
                                        100 * bytes / (us * 1e3) / peak_gbs)
                      : std::string("            n/a              ");
      };
      std::printf("%-52s %-6s gate/up %.1f MB, down (%s) %.1f MB a token\n", sh.what, std::string(info.name).c_str(),
                  gu_bytes / 1e6, std::string(dinfo.name).c_str(), dn_bytes / 1e6);
      double best_gu = 0, best_dn = 0, best_un = 0;
      std::string best_gu_name, best_dn_name, best_un_name;
      for (const Pair& p : pairs) {
        double tg = 0, td = 0, tu = 0;
        for (auto [l, params, out] :
             {std::tuple{&p.gu, &gu, &tg}, std::tuple{&p.dn, &dn, &td}, std::tuple{&p.un, &un, &tu}})
          if (*l) {
            auto t = time_one(**l, *params);
            if (!t.ok()) return Fail(t.status());
            *out = *t;
          }
        if (tg > 0 && (best_gu == 0 || tg < best_gu)) best_gu = tg, best_gu_name = name_of(p.g);
        if (td > 0 && (best_dn == 0 || td < best_dn)) best_dn = td, best_dn_name = name_of(p.g);
        if (tu > 0 && (best_un == 0 || tu < best_un)) best_un = tu, best_un_name = name_of(p.g);
        std::printf("    %-22s gate/up %s | down %s | unfused down %s\n", name_of(p.g).c_str(),
                    cell(tg, gu_bytes).c_str(), cell(td, dn_bytes).c_str(), cell(tu, dn_bytes).c_str());
      }
      if (sweep)
        std::printf("    best: gate/up %s (%.2f us), down %s (%.2f us), unfused down %s (%.2f us)\n",
                    best_gu_name.c_str(), best_gu, best_dn_name.c_str(), best_dn, best_un_name.c_str(), best_un);
      // The layer's four launches in order (x q8, gate/up, h q8, down) at the unit's geometry, as the
      // decode graph runs them (programmatic dependent launch between them).
      if (pairs[0].gu && pairs[0].dn) {
        auto layer = TimeCalls(dev, iters, [&](int i) -> absl::Status {
          const uint64_t set = static_cast<uint64_t>((i % kSets) * S * 4);
          kc::GemvQuantMoeParams a = gu, b = dn;
          a.ids = b.ids = ids->ptr() + set;
          b.wts = wts->ptr() + set;
          if (absl::Status st = launch(lx, qx); !st.ok()) return st;
          if (absl::Status st = launch(*pairs[0].gu, a); !st.ok()) return st;
          if (absl::Status st = launch(lh, qh); !st.ok()) return st;
          return launch(*pairs[0].dn, b);
        });
        if (!layer.ok()) return Fail(layer.status());
        std::printf("    the layer's launches in order (x q8, gate/up, h q8, down): %.2f us\n", *layer);
      }
    }
  return 0;
}

// ---- the deltanet section: kernels/cuda/DeltaNetChunked.cu ----

// The gated-delta prefill scan (gated_delta_scan with its q / k l2 norms, as fuse-delta-net-inputs
// leaves it) at Qwen3.5's delta-net shapes, through the unit the executor selects
// (gated_delta_scan_chunked): each launch timed alone and the pair, against issue 17's goal
// (<= 0.15 ms per layer at T = 4,096 and <= 0.45 ms at 16,384 on the 9B shape). Inputs are
// constants (q = k rows of 0.05, v = 1, g = -0.05, beta = 0.5): the time does not depend on them.
struct ScanShape {
  const char* what;
  int64_t hk, hv, d;
};
constexpr ScanShape kScanShapes[] = {{"9B (16 k / 32 v heads x 128)", 16, 32, 128},
                                     {"0.8B (16 k / 16 v heads x 128)", 16, 16, 128}};

int RunDeltaNetSection(const CudaDevice& dev, codegen::KernelCompiler& compiler, int iters,
                       const std::vector<int64_t>& lengths) {
  const auto& d = dev.driver();
  const auto stream = dev.stream();
  const kc::Target target = dev.target();
  const kc::GpuOpImpl* unit = kc::FindGpuOpImpl("gated_delta_scan_chunked");
  if (unit == nullptr) return Fail(absl::InternalError("no unit gated_delta_scan_chunked"));
  std::printf("\nDeltaNetChunked.cu (gated_delta_scan_chunked, precision bf16 unless named), CUDA graphs of %d calls\n",
              iters);
  std::printf("%-32s %-5s %6s | %10s %10s %10s | %9s %s\n", "shape", "prec", "T", "prep ms", "scan ms", "pair ms",
              "TFLOP/s", "goal (9B)");
  for (const ScanShape& sh : kScanShapes)
    for (const char* precision : {"bf16", "f32"})
      for (int64_t T : lengths) {
        const std::string text = absl::StrFormat(
            "state delta @delta : f32[%d, %d, %d]\n"
            "func @f(%%q: f32[%d, %d, %d], %%k: f32[%d, %d, %d], %%v: f32[%d, %d, %d], %%g: f32[%d, %d], "
            "%%beta: f32[%d, %d]) -> (f32[%d, %d, %d]) {\n"
            "  %%o = gated_delta_scan(%%q, %%k, %%v, %%g, %%beta, @delta) {precision = \"%s\", qk_l2_eps = 1e-06, "
            "scale = 0.0883883} : f32[%d, %d, %d]\n  return %%o\n}\n",
            sh.hv, sh.d, sh.d, T, sh.hk, sh.d, T, sh.hk, sh.d, T, sh.hv, sh.d, T, sh.hv, T, sh.hv, T, sh.hv, sh.d,
            precision, T, sh.hv, sh.d);
        auto m = ir::ParseModule(text);
        if (!m.ok()) return Fail(m.status());
        const ir::Op& op = *(*m)->function("f")->Ops().front();
        auto shapes = kc::ShapesAt(op, T, kc::WeightMode::kBlocks);
        if (!shapes.ok()) return Fail(shapes.status());
        auto sel = unit->Select(kc::SelectContext{op, *shapes, target});
        if (!sel.ok()) return Fail(sel.status());
        if (!sel->has_value()) {
          std::printf("%-32s %-5s %6ld | not selected\n", sh.what, precision, static_cast<long>(T));
          continue;
        }
        const kc::OpSelection& s = **sel;
        std::vector<kc::ModuleSpec> mods;
        for (const kc::Launch& l : s.launches) mods.push_back(l.kernel.module);
        auto compiled = CompileAndLoad(dev, compiler, std::move(mods));
        if (!compiled.ok()) return Fail(compiled.status());
        const LoadedModules& loaded = *compiled;
        const int64_t nq = T * sh.hk * sh.d, nv = T * sh.hv * sh.d, ng = T * sh.hv, ns = sh.hv * sh.d * sh.d;
        std::vector<DeviceBuffer> bufs;
        for (int64_t n : {nq, nq, nv, ng, ng, ns, nv, std::max<int64_t>(s.scratch_bytes / 4, 1)}) {
          auto b = dev.Alloc(static_cast<size_t>(n * 4), "deltanet operand");
          if (!b.ok()) return Fail(b.status());
          bufs.push_back(std::move(*b));
        }
        const uint32_t fill[] = {0x3d4ccccdu, 0x3d4ccccdu, 0x3f800000u, 0xbd4ccccdu, 0x3f000000u, 0u, 0u, 0u};
        for (size_t i = 0; i < bufs.size(); ++i)
          d.cuMemsetD32Async(bufs[i].ptr(), fill[i], bufs[i].bytes() / 4, stream);
        std::vector<kc::DeviceMatrix> operands;
        for (int i = 1; i < 6; ++i) {
          kc::DeviceMatrix dm;
          dm.data = bufs[static_cast<size_t>(i)].ptr();
          operands.push_back(dm);
        }
        kc::FixedBindContext ctx(op, s, *shapes, bufs[0].ptr(), -1, operands, {bufs[6].ptr()}, bufs[7].ptr());
        kc::DeviceWork work;
        if (absl::Status st = unit->Bind(ctx, work); !st.ok()) return Fail(st);
        struct Call {
          runtime::cuda::CUfunction fn;
          const kc::Launch* l;
          kc::ParamBlock params;
        };
        std::vector<Call> calls;
        for (const kc::DeviceAction& a : work.actions()) {
          const auto& k = std::get<kc::KernelCall>(a);
          const kc::Launch& l = s.launches[k.launch];
          auto fn = loaded.at(l.kernel.module.Key())->Function(l.kernel.entry, l.smem);
          if (!fn.ok()) return Fail(fn.status());
          calls.push_back({*fn, &l, k.params});
        }
        // Time launch `only` (or every launch for -1).
        auto time = [&](int only) {
          return TimeCalls(dev, iters, [&](int) -> absl::Status {
            for (size_t ci = 0; ci < calls.size(); ++ci) {
              if (only >= 0 && static_cast<int>(ci) != only) continue;
              Call& c = calls[ci];
              void* args[] = {c.params.bytes.data()};
              MEMRA_RETURN_IF_ERROR(CuCheck(runtime::cuda::LaunchKernel(d, c.fn, c.l->grid, c.l->block, c.l->smem,
                                                                        stream, args, false, c.l->cluster),
                                            c.l->kernel.ToString()));
            }
            return absl::OkStatus();
          });
        };
        std::vector<double> ms;
        for (int only : {0, 1, -1}) {
          auto us = only < static_cast<int>(calls.size()) ? time(only) : absl::StatusOr<double>(0.0);
          if (!us.ok()) return Fail(us.status());
          ms.push_back(*us / 1000.0);
        }
        const double tflops = work.flops() / (ms[2] * 1e-3) / 1e12;
        const char* goal = sh.hv != 32 ? "" : T == 4096 ? "<= 0.15 ms" : T == 16384 ? "<= 0.45 ms" : "";
        std::printf("%-32s %-5s %6ld | %10.3f %10.3f %10.3f | %9.1f %s\n", sh.what, precision, static_cast<long>(T),
                    ms[0], ms[1], ms[2], tflops, goal);
      }
  return 0;
}

// ---- the attention section: kernels/cuda/FlashAttention.cu and FlashAttentionWgmma.cu ----

// Causal gated prefill attention (attention_gated at precision bf16 over bf16 caches, read in
// place) at the shapes issue 17 names, through the flash_attention unit: as it selects for the
// device (the wgmma kernel on Hopper) and as it selects for a pre-Hopper target (FlashAttention.cu's
// mma.sync kernel, compiled for this device), each a CUDA graph of --iters calls; TFLOP/s counts
// the causal half (4 T (T + 1) / 2 Hq D). The two outputs are compared (nmse), so a fast wrong
// kernel shows.
struct AttentionShape {
  const char* what;
  int64_t hq, hkv, d;
};
constexpr AttentionShape kAttentionShapes[] = {{"9B (16 q / 4 kv heads x 256)", 16, 4, 256},
                                               {"Gemma 4 31B full (32 / 4 x 512)", 32, 4, 512},
                                               {"Step 3.5 (64 / 8 x 128)", 64, 8, 128}};

int RunAttentionSection(const CudaDevice& dev, codegen::KernelCompiler& compiler, int iters,
                        const std::vector<int64_t>& lengths) {
  const auto& d = dev.driver();
  const auto stream = dev.stream();
  const kc::GpuOpImpl* unit = kc::FindGpuOpImpl("flash_attention");
  if (unit == nullptr) return Fail(absl::InternalError("no unit flash_attention"));
  std::printf("\nattention_gated, precision bf16, bf16 caches, causal from position 0; CUDA graphs of %d calls\n",
              iters);
  std::printf("%-32s %6s | %-22s %10s %9s | %-22s %10s %9s | %8s\n", "shape", "T", "kernel", "ms", "TFLOP/s", "kernel",
              "ms", "TFLOP/s", "nmse");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  for (const AttentionShape& sh : kAttentionShapes)
    for (int64_t T : lengths) {
      const std::string text = absl::StrFormat(
          "state kv @kc : bf16[%d, %d, %d]\nstate kv @vc : bf16[%d, %d, %d]\n"
          "func @f(%%q: f32[%d, %d, %d], %%pos: i32[%d], %%gate: f32[%d, %d, %d]) -> (f32[%d, %d, %d]) {\n"
          "  %%o = attention_gated(%%q, @kc, @vc, %%pos, %%gate) {precision = \"bf16\", scale = %g} : "
          "f32[%d, %d, %d]\n  return %%o\n}\n",
          T, sh.hkv, sh.d, T, sh.hkv, sh.d, T, sh.hq, sh.d, T, T, sh.hq, sh.d, T, sh.hq, sh.d,
          1.0 / std::sqrt(static_cast<double>(sh.d)), T, sh.hq, sh.d);
      auto m = ir::ParseModule(text);
      if (!m.ok()) return Fail(m.status());
      const ir::Op& op = *(*m)->function("f")->Ops().front();
      auto shapes = kc::ShapesAt(op, T, kc::WeightMode::kBlocks);
      if (!shapes.ok()) return Fail(shapes.status());
      const int64_t nq = T * sh.hq * sh.d, nkv = T * sh.hkv * sh.d;
      std::vector<float> hq(static_cast<size_t>(nq)), hgate(static_cast<size_t>(nq));
      std::vector<uint16_t> hkv(static_cast<size_t>(2 * nkv));
      std::vector<int32_t> hpos(static_cast<size_t>(T));
      for (float& x : hq) x = U(rng);
      for (float& x : hgate) x = U(rng);
      for (uint16_t& x : hkv) {
        const float f = U(rng);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        x = static_cast<uint16_t>(u >> 16);
      }
      for (int64_t t = 0; t < T; ++t) hpos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
      std::vector<DeviceBuffer> bufs;  // q, k, v, pos, gate, o (x2), scratch
      for (int64_t bytes : {nq * 4, nkv * 2, nkv * 2, T * 4, nq * 4, nq * 4, nq * 4, int64_t{256}}) {
        auto b = dev.Alloc(static_cast<size_t>(bytes), "attention operand");
        if (!b.ok()) return Fail(b.status());
        bufs.push_back(std::move(*b));
      }
      absl::Status up = dev.Upload(bufs[0].ptr(), hq.data(), hq.size() * 4);
      if (up.ok()) up = dev.Upload(bufs[1].ptr(), hkv.data(), static_cast<size_t>(nkv) * 2);
      if (up.ok()) up = dev.Upload(bufs[2].ptr(), hkv.data() + nkv, static_cast<size_t>(nkv) * 2);
      if (up.ok()) up = dev.Upload(bufs[3].ptr(), hpos.data(), hpos.size() * 4);
      if (up.ok()) up = dev.Upload(bufs[4].ptr(), hgate.data(), hgate.size() * 4);
      if (!up.ok()) return Fail(up);
      std::string cells[2];
      std::vector<float> outs[2];
      for (int variant = 0; variant < 2; ++variant) {
        kc::Target target = dev.target();
        if (variant == 1) target.arch = 89;  // the selection a pre-Hopper target gets: mma.sync
        auto sel = unit->Select(kc::SelectContext{op, *shapes, target});
        if (!sel.ok()) return Fail(sel.status());
        if (!sel->has_value()) {
          cells[variant] = absl::StrFormat("%-22s %10s %9s", "not selected", "", "");
          continue;
        }
        const kc::OpSelection& s = **sel;
        std::vector<kc::ModuleSpec> mods;
        for (const kc::Launch& l : s.launches) mods.push_back(l.kernel.module);
        auto cubins = compiler.CompileAll(mods);
        if (!cubins.ok()) return Fail(cubins.status());
        std::vector<std::unique_ptr<LoadedModule>> loaded;
        for (size_t i = 0; i < mods.size(); ++i) {
          auto l = LoadedModule::Load(dev, *(*cubins)[i], mods[i].Key());
          if (!l.ok()) return Fail(l.status());
          loaded.push_back(std::move(*l));
        }
        std::vector<kc::DeviceMatrix> operands;
        for (int i = 1; i < 5; ++i) {
          kc::DeviceMatrix dm;
          dm.data = bufs[static_cast<size_t>(i)].ptr();
          operands.push_back(dm);
        }
        const auto& obuf = bufs[static_cast<size_t>(5 + variant)];
        d.cuMemsetD32Async(obuf.ptr(), 0x7fc00000u, static_cast<size_t>(nq), stream);  // NaN: unwritten shows
        kc::FixedBindContext ctx(op, s, *shapes, bufs[0].ptr(), -1, operands, {obuf.ptr()}, bufs[7].ptr());
        kc::DeviceWork work;
        if (absl::Status st = unit->Bind(ctx, work); !st.ok()) return Fail(st);
        const auto& k = std::get<kc::KernelCall>(work.actions().back());
        const kc::Launch& l = s.launches[k.launch];
        auto fn = loaded.back()->Function(l.kernel.entry, l.smem);
        if (!fn.ok()) return Fail(fn.status());
        kc::ParamBlock params = k.params;
        auto us = TimeCalls(dev, iters, [&](int) -> absl::Status {
          void* args[] = {params.bytes.data()};
          return CuCheck(runtime::cuda::LaunchKernel(d, *fn, l.grid, l.block, l.smem, stream, args, false, l.cluster),
                         l.kernel.ToString());
        });
        if (!us.ok()) return Fail(us.status());
        outs[variant].resize(static_cast<size_t>(nq));
        if (absl::Status st = dev.Download(outs[variant].data(), obuf.ptr(), outs[variant].size() * 4); !st.ok())
          return Fail(st);
        const double ms = *us / 1000.0;
        cells[variant] = absl::StrFormat("%-22s %10.3f %9.1f", std::string(l.kernel.entry).substr(0, 22), ms,
                                         work.flops() / (ms * 1e-3) / 1e12);
      }
      double err = 0, ref = 0;
      bool finite = true;
      if (!outs[0].empty() && !outs[1].empty())
        for (size_t i = 0; i < outs[0].size(); ++i) {
          finite = finite && std::isfinite(outs[0][i]) && std::isfinite(outs[1][i]);
          err += (outs[0][i] - outs[1][i]) * static_cast<double>(outs[0][i] - outs[1][i]);
          ref += outs[1][i] * static_cast<double>(outs[1][i]);
        }
      std::printf("%-32s %6ld | %s | %s | %8s\n", sh.what, static_cast<long>(T), cells[0].c_str(), cells[1].c_str(),
                  !finite   ? "NON-FINITE"
                  : ref > 0 ? absl::StrFormat("%.2g", err / ref).c_str()
                            : "-");
    }
  return 0;
}

// ---- the gemm section: cuBLASLt's candidates for the prefill products ----

// The 9B's prefill products (bf16 weights, M tokens): each of the heuristic's first --candidates
// algorithms timed as a CUDA graph, so a better choice than the heuristic's first shows as a ratio.
struct GemmShape {
  const char* what;
  int64_t n, k;
};
constexpr GemmShape kGemmShapes[] = {{"ffn gate / up 12288x4096", 12288, 4096}, {"ffn down 4096x12288", 4096, 12288},
                                     {"attn / ssm out 4096x4096", 4096, 4096},  {"ssm qkv 8192x4096", 8192, 4096},
                                     {"attn q+gate 8192x4096", 8192, 4096},     {"attn k or v 1024x4096", 1024, 4096}};

int RunGemmSection(const CudaDevice& dev, runtime::cuda::CublasLt& blas, int iters, int candidates,
                   const std::vector<int64_t>& tokens_list) {
  const auto stream = dev.stream();
  std::printf("\ncuBLASLt bf16 x bf16 -> f32 products, the heuristic's first %d candidates, CUDA graphs of %d calls\n",
              candidates, iters);
  std::printf("%-28s %6s | %-10s %9s | %-10s %9s %5s | %s\n", "shape", "M", "heuristic", "TFLOP/s", "best", "TFLOP/s",
              "cand", "all candidates (us)");
  for (int64_t M : tokens_list)
    for (const GemmShape& sh : kGemmShapes) {
      auto x = dev.Alloc(static_cast<size_t>(M * sh.k * 2), "x");
      auto w = dev.Alloc(static_cast<size_t>(sh.n * sh.k * 2), "w");
      auto y = dev.Alloc(static_cast<size_t>(M * sh.n * 4), "y");
      for (auto* b : {&x, &w, &y})
        if (!b->ok()) return Fail(b->status());
      dev.driver().cuMemsetD32Async(x->ptr(), 0x3c003c00u, M * sh.k / 2, stream);  // bf16 0.0078
      dev.driver().cuMemsetD32Async(w->ptr(), 0x3c003c00u, sh.n * sh.k / 2, stream);
      auto n = blas.Candidates(M, sh.n, sh.k, ir::DType::kBF16, candidates);
      if (!n.ok()) return Fail(n.status());
      std::vector<double> us;
      for (int cand = 0; cand < *n; ++cand) {
        auto t = TimeCalls(dev, iters, [&](int) {
          return blas.MatmulWith(cand, x->ptr(), w->ptr(), y->ptr(), M, sh.n, sh.k, ir::DType::kBF16, stream);
        });
        us.push_back(t.ok() ? *t : -1.0);  // a candidate that fails to run: -1
      }
      const double flop = 2.0 * M * sh.n * sh.k;
      int best = 0;
      for (int i = 0; i < *n; ++i)
        if (us[i] > 0 && (us[best] <= 0 || us[i] < us[best])) best = i;
      std::string all;
      for (double u : us) absl::StrAppend(&all, u > 0 ? absl::StrFormat(" %.1f", u) : std::string(" fail"));
      std::printf("%-28s %6ld | %8.1f us %9.1f | %8.1f us %9.1f %5d |%s\n", sh.what, static_cast<long>(M), us[0],
                  flop / (us[0] * 1e6), us[best], flop / (us[best] * 1e6), best, all.c_str());
    }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  int iters = 50;
  double peak_gbs = 4600;  // streaming read measured on the H200 (shared/design/h200-measurements.md)
  std::string section = "all";
  std::vector<ir::DType> formats = {ir::DType::kQ8_0,  ir::DType::kQ4_K, ir::DType::kQ5_K,  ir::DType::kQ6_K,
                                    ir::DType::kQ4_0,  ir::DType::kQ4_1, ir::DType::kQ5_0,  ir::DType::kQ5_1,
                                    ir::DType::kQ2_K,  ir::DType::kQ3_K, ir::DType::kMXFP4, ir::DType::kIQ4_NL,
                                    ir::DType::kIQ4_XS};
  int64_t tokens = 1;
  bool sweep = false;
  std::vector<int64_t> lengths = {4096, 16384};
  int candidates = 16;
  std::string only;  // the moe and quant sections: shapes whose name contains it
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iters") == 0) {
      iters = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--peak-gbs") == 0) {
      peak_gbs = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--section") == 0) {
      section = argv[i + 1];
    } else if (std::strcmp(argv[i], "--tokens") == 0) {
      tokens = std::clamp<int64_t>(std::atoi(argv[i + 1]), 1, 8);
    } else if (std::strcmp(argv[i], "--only") == 0) {
      only = argv[i + 1];
    } else if (std::strcmp(argv[i], "--sweep") == 0) {
      sweep = std::atoi(argv[i + 1]) != 0;
    } else if (std::strcmp(argv[i], "--candidates") == 0) {
      candidates = std::clamp(std::atoi(argv[i + 1]), 1, 64);
    } else if (std::strcmp(argv[i], "--lengths") == 0) {
      lengths.clear();
      for (absl::string_view l : absl::StrSplit(argv[i + 1], ',')) {
        int64_t t = 0;
        if (!absl::SimpleAtoi(l, &t) || t < 1 || t > (1 << 20))
          return Fail(absl::InvalidArgumentError(absl::StrCat("--lengths: '", l, "' is not a length in 1..1048576")));
        lengths.push_back(t);
      }
    } else if (std::strcmp(argv[i], "--formats") == 0) {
      formats.clear();
      for (absl::string_view f : absl::StrSplit(argv[i + 1], ',')) {
        const auto t = ir::ParseDType(f);
        if (!t || !kernels::cuda::GemvQuantReads(*t))
          return Fail(absl::InvalidArgumentError(absl::StrCat("--formats: GemvQuant.cu does not read '", f, "'")));
        formats.push_back(*t);
      }
    }
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
                          {"ssm beta 32x4096", 32, 4096},         {"head 248320x4096", 248320, 4096},
                          {"0.8b ssm qkv 6144x1024", 6144, 1024}, {"0.8b ffn down 1024x3584", 1024, 3584}};
  if (section == "deltanet") return RunDeltaNetSection(**dev, **compiler, iters, lengths);
  if (section == "quant")
    return RunQuantSection(**dev, **compiler, **blas, iters, peak_gbs, formats, tokens, sweep, only);
  if (section == "moe") return RunMoeSection(**dev, **compiler, iters, peak_gbs, formats, sweep, only);
  if (section == "gemm") return RunGemmSection(**dev, **blas, iters, candidates, lengths);
  if (section == "attention") return RunAttentionSection(**dev, **compiler, iters, lengths);
  std::printf("%s, %d iterations per row, roofline %.0f GB/s\n", (*dev)->Describe().c_str(), iters, peak_gbs);
  std::printf("%-24s %-22s %10s %10s %8s\n", "shape", "kernel", "us", "GB/s", "% roof");
  runtime::cuda::CUevent e0 = nullptr, e1 = nullptr;
  d.cuEventCreate(&e0, 0);
  d.cuEventCreate(&e1, 0);
  for (const Shape& s : shapes) {
    // Copies of the weights cycled through so the working set exceeds the L2 cache several times
    // over (decode reads each weight once a token: a product that re-reads a 32 MB matrix from a
    // 50 MB L2 would measure the cache).
    const int64_t bytes_w = s.n * s.k * 2;
    const int copies = static_cast<int>(std::clamp<int64_t>((256ll << 20) / bytes_w + 1, 1, 64));
    std::vector<runtime::cuda::DeviceBuffer> ws;
    for (int c = 0; c < copies; ++c) {
      auto w = (*dev)->Alloc(bytes_w, "w");  // bf16 (also holds the q8 values)
      if (!w.ok()) return Fail(w.status());
      // bf16 1.0 pairs / q8 values 0x01: finite sums, no denormals.
      d.cuMemsetD32Async(w->ptr(), 0x3f803f80u, s.n * s.k / 2, stream);
      ws.push_back(std::move(*w));
    }
    auto sc = (*dev)->Alloc(s.n * s.k / 32 * 4, "scales");
    auto x = (*dev)->Alloc(s.k * 4, "x");
    auto xb = (*dev)->Alloc(s.k * 2, "x bf16");
    auto y = (*dev)->Alloc(s.n * 4, "y");
    for (auto* b : {&sc, &x, &xb, &y})
      if (!b->ok()) return Fail(b->status());
    d.cuMemsetD32Async(sc->ptr(), 0x3c000000u, s.n * s.k / 32, stream);
    d.cuMemsetD32Async(x->ptr(), 0x3f800000u, s.k, stream);
    d.cuMemsetD32Async(xb->ptr(), 0x3f803f80u, s.k / 2, stream);
    // Launched as the decode graph launches them: with programmatic dependent launch, so a
    // product's weight prefetch overlaps the tail of the one before.
    struct Variant {
      std::string name;
      int storage, stage;  // storage 0: cuBLASLt bf16
      int prefetch = 16;   // GEMV_PREFETCH: 16-byte pieces a lane loads before the grid dependency wait
      int warps = 8;       // GEMV_WARPS: rows (warps) per block
      bool split = false;  // gemv_splitk: two warps a row (warps / 2 rows a block)
    };
    std::vector<Variant> variants = {{"gemv bf16 8 warps", 2, 0},
                                     {"gemv bf16 4 warps", 2, 0, 16, 4},
                                     {"gemv bf16 2 warps", 2, 0, 16, 2},
                                     {"gemv bf16 8w prefetch 8", 2, 0, 8},
                                     {"gemv bf16 4w prefetch 8", 2, 0, 8, 4},
                                     {"gemv bf16 split-K 2", 2, 0, 16, 8, true},
                                     {"gemv bf16 x-in-smem", 2, 1},
                                     {"gemv q8 8 warps", 3, 0},
                                     {"cuBLASLt bf16 M=1", 0, 0}};
    for (const Variant& v : variants) {
      runtime::cuda::CUfunction fn = nullptr;
      std::unique_ptr<runtime::cuda::LoadedModule> mod;
      if (v.storage != 0) {
        kernels::cuda::ModuleSpec m;
        m.file = "Gemv.cu";
        m.defines = kernels::cuda::MakeDefines(
            {kernels::cuda::Def("GEMV_K", s.k), kernels::cuda::Def("GEMV_W", v.storage),
             kernels::cuda::Def("GEMV_WARPS", v.warps), kernels::cuda::Def("GEMV_STAGE_X", v.stage),
             kernels::cuda::Def("GEMV_PREFETCH", v.prefetch), kernels::cuda::Def("GEMV_SPLITK", v.split ? 2 : 0)});
        auto cubin = (*compiler)->CompileAll({m});
        if (!cubin.ok()) return Fail(cubin.status());
        auto loaded = runtime::cuda::LoadedModule::Load(**dev, *(*cubin)[0], m.Key());
        if (!loaded.ok()) return Fail(loaded.status());
        mod = std::move(*loaded);
        auto f = mod->Function(v.split ? "gemv_splitk" : "gemv");
        if (!f.ok()) return Fail(f.status());
        fn = *f;
      }
      int call = 0;
      auto run = [&]() -> absl::Status {
        const runtime::cuda::DeviceBuffer& w = ws[call++ % copies];
        if (v.storage == 0) return (*blas)->Matmul(xb->ptr(), w.ptr(), y->ptr(), 1, s.n, s.k, ir::DType::kBF16, stream);
        kernels::cuda::GemvParams gp;
        gp.w.w = w.ptr();
        gp.w.scale = sc->ptr();
        gp.x = x->ptr();
        gp.y = y->ptr();
        gp.n_rows = static_cast<int>(s.n);
        void* args[] = {&gp};
        const int64_t rows_per_block = v.split ? v.warps / 2 : v.warps;
        return CuCheck(
            runtime::cuda::LaunchKernel(d, fn, static_cast<unsigned>((s.n + rows_per_block - 1) / rows_per_block),
                                        static_cast<unsigned>(32 * v.warps), 0, stream, args,
                                        /*programmatic=*/true, /*cluster=*/1),
            "gemv launch");
      };
      for (int i = 0; i < copies + 4; ++i)
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
  if (section == "all") return RunQuantSection(**dev, **compiler, **blas, iters, peak_gbs, formats, tokens, sweep);
  return 0;
}
