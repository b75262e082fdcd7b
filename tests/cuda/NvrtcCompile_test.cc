// CI check without a GPU: NVRTC compiles every kernel module the tiny model's plan needs (both
// functions, every token bucket, the batched engine's @step at its row buckets, weights as blocks
// and as bf16 copies) for sm_90, and Dequant.cu
// for every block format; any compile error fails. A second compiler over the same cache dir must
// find everything on disk.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "codegen/KernelCompiler.h"
#include "codegen/KernelModules.h"
#include "codegen/KernelSources.h"
#include "codegen/Nvrtc.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "ir/Function.h"
#include "ir/Parser.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/MoeGemm.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"
#include "tests/cuda/CudaTestUtil.h"

namespace memra::codegen {
namespace {

// `mods` compiled for sm_90 without a cache, each an ELF cubin; the compiler's counts printed.
void ExpectCompilesForSm90(const std::vector<ModuleSpec>& mods, const char* what) {
  CompileOptions o;
  o.arch = 90;
  o.cache_dir = "-";
  auto c = KernelCompiler::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto cubins = (*c)->CompileAll(mods);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  for (const auto& cb : *cubins) EXPECT_EQ((*cb)[0], 0x7f);  // ELF
  std::printf("  %s: %s\n", what, (*c)->stats().ToString().c_str());
}

std::vector<ModuleSpec> TinyModelModules(const std::string& model, kernels::cuda::WeightMode weights,
                                         frontends::KvCacheTypes cache_types = {}) {
  auto file = gguf::GgufFile::Open(model);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  std::vector<ModuleSpec> all;
  std::set<std::string> seen;
  // The one-sequence module (last-row and all-row logits) and the batched engine's (4 slots: @step
  // at the row buckets BatchedSlots uses).
  for (int variant = 0; variant < 3; ++variant) {
    frontends::LowerOptions lo;
    lo.prefill_all_logits = variant == 1;
    lo.slots = variant == 2 ? 4 : 0;
    lo.cache_types = cache_types;
    auto m = frontends::LowerModel(**file, lo);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    std::vector<int64_t> buckets = BucketLadder();
    buckets.insert(buckets.begin(), 1);
    if (lo.slots > 0) buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512};
    for (const auto& fn : (*m)->functions())
      for (int64_t b : fn->name() == "decode" ? std::vector<int64_t>{1} : buckets) {
        auto mods = ModulesForFunction(*fn, b, *kernels::cuda::TargetPreset("sm_90"), weights);
        EXPECT_TRUE(mods.ok()) << mods.status();
        if (!mods.ok()) return {};
        for (auto& ms : *mods)
          if (seen.insert(ms.Key()).second) all.push_back(ms);
      }
  }
  return all;
}

TEST(NvrtcCompileTest, EmbeddedSourcesPresent) {
  std::set<std::string> names;
  for (const EmbeddedSource& s : EmbeddedKernelSources()) names.insert(s.name);
  for (const char* f : {"Common.cuh", "Elementwise.cu", "Norm.cu", "Rope.cu", "Attention.cu", "DeltaNet.cu",
                        "FlashAttention.cu", "FlashAttentionWgmma.cu", "Wgmma.cuh", "Dequant.cu", "DequantParams.h",
                        "Sample.cu", "SampleMath.cuh", "SampleParams.h"})
    EXPECT_TRUE(names.count(f)) << f;
  EXPECT_FALSE(KernelSource("nope.cu").ok());
}

TEST(NvrtcCompileTest, BucketLadder) {
  EXPECT_EQ(TokenBucket(1), 1);
  EXPECT_EQ(TokenBucket(2), 16);
  EXPECT_EQ(TokenBucket(16), 16);
  EXPECT_EQ(TokenBucket(17), 32);
  EXPECT_EQ(TokenBucket(4096), 4096);
  EXPECT_EQ(TokenBucket(4097), 8192);
}

TEST(NvrtcCompileTest, TinyModelPlanCompilesForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  // f32 weights (cuBLASLt f32) and q8_0 as blocks (dequantized into the workspace, bf16 GEMMs) and
  // as bf16 copies (--weights bf16: bf16 GEMMs, the bf16 GEMV of decode): every kernel they need.
  std::vector<ModuleSpec> mods;
  std::set<std::string> seen;
  for (const char* name : {"models/qwen35-tiny-f32.gguf", "models/qwen35-tiny-q8_0.gguf"}) {
    const std::string model = testing::CudaTestDataPath(name);
    if (!testing::FileExists(model)) GTEST_SKIP() << "tiny model fixture not found: " << model;
    for (kernels::cuda::WeightMode w : {kernels::cuda::WeightMode::kBlocks, kernels::cuda::WeightMode::kBf16})
      for (const ModuleSpec& m : TinyModelModules(model, w))
        if (seen.insert(m.Key()).second) mods.push_back(m);
    // 16-bit and q8_0 KV caches (-ctk / -ctv): the attention, kv_append and paged modules of each
    // element type pair (f32 model: the CUDA-core prefill; q8_0: flash attention, a bf16 cache in
    // place, a q8_0 one through the bf16 copy).
    for (frontends::KvCacheTypes kv : {frontends::KvCacheTypes{ir::DType::kF16, ir::DType::kF16},
                                       frontends::KvCacheTypes{ir::DType::kBF16, ir::DType::kF32},
                                       frontends::KvCacheTypes{ir::DType::kQ8_0, ir::DType::kQ8_0}})
      for (const ModuleSpec& m : TinyModelModules(model, kernels::cuda::WeightMode::kBlocks, kv))
        if (seen.insert(m.Key()).second) mods.push_back(m);
  }
  ASSERT_FALSE(mods.empty());
  bool has_gemv = false, has_dequant = false;
  for (const ModuleSpec& m : mods) {
    has_gemv |= m.Key().find("Gemv.cu") != std::string::npos;
    has_dequant |= m.Key() == "Dequant.cu<DEQ_TYPE=8>";
  }
  EXPECT_TRUE(has_gemv) << "the q8_0 model's decode with --weights bf16 should select the one-token GEMV";
  EXPECT_TRUE(has_dequant) << "the q8_0 model's products on blocks should dequantize with Dequant.cu";
  // Dequant.cu for every format the GPU reads as blocks (both entries live in each module).
  for (ir::DType d : kernels::cuda::GpuBlockFormats()) {
    ModuleSpec m;
    m.file = "Dequant.cu";
    m.defines = MakeDefines({Def("DEQ_TYPE", ir::InfoOf(d).ggml_id)});
    if (seen.insert(m.Key()).second) mods.push_back(m);
  }
  // Gemv.cu's variants no model selects today (the q8 storage, x staged in shared memory), which
  // memra-kernel-bench measures: compiled here too so they stay buildable.
  for (int w : {1, 3})
    for (int stage : {0, 1}) {
      ModuleSpec m;
      m.file = "Gemv.cu";
      m.defines =
          MakeDefines({Def("GEMV_K", 4096), Def("GEMV_W", w), Def("GEMV_WARPS", 8), Def("GEMV_STAGE_X", stage)});
      mods.push_back(m);
    }
  // The device sampler at the 9B's vocabulary and the default penalty entries (its static shared
  // memory near the 48 KiB a block gets without opting in).
  {
    ModuleSpec m;
    m.file = "Sample.cu";
    m.defines = MakeDefines({Def("SMP_V", 248320), Def("SMP_P", 64)});
    mods.push_back(m);
  }
  // FlashAttention.cu at the head dims its unit takes (Gemma 4's 512 splits the output columns),
  // 4 and 8 warps, one and two K/V buffers, so all stay buildable.
  for (auto [hq, hkv, d, dv, warps, stages] : {std::array<int, 6>{8, 8, 64, 64, 4, 2},
                                               {16, 8, 128, 128, 4, 2},
                                               {16, 4, 256, 256, 4, 2},
                                               {16, 4, 256, 256, 8, 2},
                                               {8, 2, 512, 256, 4, 1}}) {
    ModuleSpec m;
    m.file = "FlashAttention.cu";
    m.defines = MakeDefines({Def("FA_HQ", hq), Def("FA_HKV", hkv), Def("FA_D", d), Def("FA_DV", dv),
                             Def("FA_WARPS", warps), Def("FA_STAGES", stages)});
    if (seen.insert(m.Key()).second) mods.push_back(m);
  }
  // FlashAttentionWgmma.cu (sm_90a) at the geometries its unit selects: one, two and three
  // warpgroups; head dim 512 in 32-key tiles.
  for (auto [hq, hkv, d, dv, wg, keys] : {std::array<int, 6>{8, 8, 64, 64, 1, 64},
                                          {16, 4, 256, 256, 2, 64},
                                          {24, 2, 128, 128, 3, 64},
                                          {16, 8, 128, 128, 2, 64},
                                          {32, 4, 512, 256, 2, 32}}) {
    ModuleSpec m;
    m.file = "FlashAttentionWgmma.cu";
    m.sm_90a = true;
    m.defines = MakeDefines(
        {Def("FA_HQ", hq), Def("FA_HKV", hkv), Def("FA_D", d), Def("FA_DV", dv), Def("FA_WG", wg), Def("FW_BC", keys)});
    mods.push_back(m);
  }
  const std::string dir = ::testing::TempDir() + "/memra-nvrtc-test-cache-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  CompileOptions o;
  o.arch = 90;
  o.cache_dir = dir;
  auto c = KernelCompiler::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto cubins = (*c)->CompileAll(mods);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  for (const auto& cb : *cubins) {
    ASSERT_TRUE(cb);
    EXPECT_GT(cb->size(), 100u);
    EXPECT_EQ((*cb)[0], 0x7f);  // ELF
  }
  std::printf("  NVRTC %s (%s): %s\n", (*nvrtc)->VersionString().c_str(), (*nvrtc)->library().c_str(),
              (*c)->stats().ToString().c_str());
  EXPECT_EQ((*c)->stats().compiled, static_cast<int64_t>(mods.size()));

  auto again = KernelCompiler::Create(o);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->CompileAll(mods).ok());
  EXPECT_EQ((*again)->stats().disk_hits, static_cast<int64_t>(mods.size()));
  EXPECT_EQ((*again)->stats().compiled, 0);
  ASSERT_TRUE((*again)->CompileAll(mods).ok());
  EXPECT_EQ((*again)->stats().memory_hits, static_cast<int64_t>(mods.size()));
  std::filesystem::remove_all(dir);
}

// A cache entry cut short or changed on disk (a full disk, a bad sector, a hand edit) is a miss:
// compiled again, identical to the first compile, and rewritten, so the next process hits it.
TEST(NvrtcCompileTest, DamagedCacheEntriesAreCompiledAgain) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  ModuleSpec m;
  m.file = "Gemv.cu";
  m.defines = MakeDefines({Def("GEMV_K", 256), Def("GEMV_W", 1), Def("GEMV_WARPS", 4), Def("GEMV_STAGE_X", 0)});
  const std::string dir = ::testing::TempDir() + "/memra-nvrtc-damaged-cache-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  CompileOptions o;
  o.arch = 90;
  o.cache_dir = dir;
  auto first = KernelCompiler::Create(o);
  ASSERT_TRUE(first.ok()) << first.status();
  auto cubins = (*first)->CompileAll({m});
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  const std::vector<uint8_t> good = *(*cubins)[0];
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u) << "one entry, no temporary left behind";
  const std::filesystem::path entry = entries[0];
  const auto size = std::filesystem::file_size(entry);

  auto damage = [&](const char* how) {
    if (std::string(how) == "truncated") {
      std::filesystem::resize_file(entry, size / 2);
    } else if (std::string(how) == "bit flipped") {
      std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(size / 3));
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x10);
      f.seekp(static_cast<std::streamoff>(size / 3));
      f.write(&c, 1);
    } else {  // the bare cubin, as caches before the checksum held it
      std::filesystem::resize_file(entry, good.size());
    }
  };
  for (const char* how : {"truncated", "bit flipped", "without its checksum"}) {
    damage(how);
    auto again = KernelCompiler::Create(o);
    ASSERT_TRUE(again.ok());
    auto c = (*again)->CompileAll({m});
    ASSERT_TRUE(c.ok()) << how << ": " << c.status();
    EXPECT_EQ((*again)->stats().disk_hits, 0) << how;
    EXPECT_EQ((*again)->stats().compiled, 1) << how;
    EXPECT_EQ(*(*c)[0], good) << how;
    EXPECT_EQ(std::filesystem::file_size(entry), size) << how << ": the entry was rewritten";
    auto next = KernelCompiler::Create(o);
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE((*next)->CompileAll({m}).ok());
    EXPECT_EQ((*next)->stats().disk_hits, 1) << how;
  }
  std::filesystem::remove_all(dir);
}

// Every dtype; the formats GemvQuant.cu reads; and a module of one at the 9B's shapes: %y = matmul(x [1, 4096],
// 4096 x 4096) and %z = matmul_swiglu(x [swiglu_tokens, 4096], 2 x 12288 x 4096).
std::vector<ir::DType> AllDTypes() {
  return {
#define MEMRA_DTYPE(Id, ...) ir::DType::k##Id,
#include "ir/DTypes.def"
#undef MEMRA_DTYPE
  };
}
std::vector<ir::DType> GemvQuantFormats() {
  std::vector<ir::DType> read;
  for (ir::DType t : AllDTypes())
    if (kernels::cuda::GemvQuantReads(t)) read.push_back(t);
  return read;
}
absl::StatusOr<std::unique_ptr<ir::Module>> GemvQuantModule(ir::DType t, int swiglu_tokens) {
  const std::string d(ir::DTypeName(t)), n = std::to_string(swiglu_tokens);
  return ir::ParseModule("weight @w : " + d + "[4096, 4096]\nweight @g : " + d + "[12288, 4096]\nweight @u : " + d +
                         "[12288, 4096]\nfunc @f(%x: f32[1, 4096], %xs: f32[" + n + ", 4096]) -> (f32[1, 4096], f32[" +
                         n +
                         ", 12288]) {\n  %y = matmul(%x, @w) : f32[1, 4096]\n  %z = matmul_swiglu(%xs, @g, @u) : f32[" +
                         n + ", 12288]\n  return %y, %z\n}\n");
}

// GemvQuant.cu (the decode GEMV on GGUF blocks) is selected only for weights on the device as
// blocks, so no fixture reaches it yet: every format it reads is compiled here as the units select
// it at a 9B shape, f32 x and q8 x staged per block at T = 1 (matmul), q8 x at T = 8 (swiglu), so
// all stay buildable.
TEST(NvrtcCompileTest, GemvQuantModulesCompileForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  namespace kc = kernels::cuda;
  const kc::Target target = *kc::TargetPreset("sm_90");
  std::vector<ModuleSpec> mods;
  for (ir::DType t : GemvQuantFormats()) {
    const std::string d(ir::DTypeName(t));
    auto m = GemvQuantModule(t, 8);
    ASSERT_TRUE(m.ok()) << m.status();
    const auto ops = (*m)->function("f")->Ops();
    for (int i = 0; i < 3; ++i) {  // matmul f32 x; swiglu q8 x; matmul q8 x staged per block
      kc::GemvQuantOptions o;
      o.x = i == 0 ? kc::GemvQuantX::kF32 : i == 1 ? kc::GemvQuantX::kQ8 : kc::GemvQuantX::kQ8Block;
      auto shapes = kc::ShapesAt(*ops[i == 2 ? 0 : i], 1, kc::WeightMode::kBlocks);
      ASSERT_TRUE(shapes.ok()) << shapes.status();
      auto s = kc::SelectGemvQuant(*ops[i == 2 ? 0 : i], *shapes, target, o);
      ASSERT_TRUE(s.has_value()) << d;
      for (const kc::Launch& l : s->launches) mods.push_back(l.kernel.module);
    }
  }
  ASSERT_EQ(mods.size(), 13u * 4);  // 13 formats; swiglu: the quantization + the product (one module)
  ExpectCompilesForSm90(mods, "GemvQuant.cu");
}

// The streamed schedule (GQ_STREAM, off by default) stays buildable: the plain product, swiglu at
// T = 1 and a two-token product, in q4_K, q6_K (realigned copies) and q8_0, forced on.
TEST(NvrtcCompileTest, GemvQuantStreamedModulesCompileForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  namespace kc = kernels::cuda;
  const kc::Target target = *kc::TargetPreset("sm_90");
  std::vector<ModuleSpec> mods;
  for (const char* d : {"q4_K", "q6_K", "q8_0"}) {
    const std::string w(d);
    const std::string text =
        "weight @w : " + w + "[5376, 21504]\nweight @g : " + w + "[21504, 5376]\nweight @u : " + w +
        "[21504, 5376]\nfunc @f(%x: f32[1, 21504], %x1: f32[1, 5376], %x2: f32[2, 21504]) -> " +
        "(f32[1, 5376], f32[1, 21504], f32[2, 5376]) {\n  %y = matmul(%x, @w) : f32[1, 5376]\n  " +
        "%z = matmul_swiglu(%x1, @g, @u) : f32[1, 21504]\n  %y2 = matmul(%x2, @w) : f32[2, 5376]\n" +
        "  return %y, %z, %y2\n}\n";
    auto m = ir::ParseModule(text);
    ASSERT_TRUE(m.ok()) << m.status();
    const auto ops = (*m)->function("f")->Ops();
    for (int i = 0; i < 3; ++i) {
      kc::GemvQuantOptions o;
      o.x = kc::GemvQuantX::kQ8;
      o.stream = 2;
      o.max_blocks = 132 * 4;  // q8_0's grid is otherwise not capped to the resident slots
      auto shapes = kc::ShapesAt(*ops[i], i == 2 ? 2 : 1, kc::WeightMode::kBlocks);
      ASSERT_TRUE(shapes.ok()) << shapes.status();
      auto s = kc::SelectGemvQuant(*ops[i], *shapes, target, o);
      ASSERT_TRUE(s.has_value()) << d << " op " << i;
      EXPECT_NE(s->launches.back().kernel.module.Key().find("GQ_STREAM=1"), std::string::npos) << d << " op " << i;
      for (const kc::Launch& l : s->launches) mods.push_back(l.kernel.module);
    }
  }
  ExpectCompilesForSm90(mods, "GemvQuant.cu streamed");
}

// x loaded before the weights' wait (GQ_XPRE, off by default) stays buildable for every format the
// block GEMV reads: the plain product and swiglu with x quantized by its own launch, the plain
// product with x staged per block.
TEST(NvrtcCompileTest, GemvQuantEarlyXModulesCompileForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  namespace kc = kernels::cuda;
  const kc::Target target = *kc::TargetPreset("sm_90");
  std::vector<ModuleSpec> mods;
  for (ir::DType t : GemvQuantFormats()) {
    const std::string d(ir::DTypeName(t));
    auto m = GemvQuantModule(t, 1);
    ASSERT_TRUE(m.ok()) << m.status();
    const auto ops = (*m)->function("f")->Ops();
    for (int i = 0; i < 3; ++i) {  // matmul, swiglu: q8 x; matmul: q8 x staged per block
      kc::GemvQuantOptions o;
      o.x = i == 2 ? kc::GemvQuantX::kQ8Block : kc::GemvQuantX::kQ8;
      o.x_early = true;
      const ir::Op& op = *ops[i == 2 ? 0 : i];
      auto shapes = kc::ShapesAt(op, 1, kc::WeightMode::kBlocks);
      ASSERT_TRUE(shapes.ok()) << shapes.status();
      auto s = kc::SelectGemvQuant(op, *shapes, target, o);
      ASSERT_TRUE(s.has_value()) << d;
      EXPECT_NE(s->launches.back().kernel.module.Key().find("GQ_XPRE=1"), std::string::npos) << d << " op " << i;
      mods.push_back(s->launches.back().kernel.module);
    }
  }
  ExpectCompilesForSm90(mods, "GemvQuant.cu early x");
}

// The exact decode class's 16-bit GEMVs of several tokens (Gemv.cu GEMV_T): plain, split-K,
// swiglu and group forms over f16, bf16 and f32 weights at T = 2 and 8, selected by the units.
TEST(NvrtcCompileTest, MultiTokenGemvModulesCompileForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  namespace kc = kernels::cuda;
  const kc::Target target = *kc::TargetPreset("sm_90");
  std::vector<ModuleSpec> mods;
  for (const char* d : {"f16", "bf16", "f32"})
    for (int T : {2, 8}) {
      const std::string w(d), t = std::to_string(T);
      // 4096 x 4096: split-K (few rows); 12288 x 4096 (swiglu, group): a warp a row.
      const std::string text = "weight @w : " + w + "[4096, 4096]\nweight @g : " + w +
                               "[12288, 4096]\nweight @u : " + w + "[12288, 4096]\nweight @b : " + w +
                               "[32, 4096]\nfunc @f(%x: f32[" + t + ", 4096]) -> (f32[" + t + ", 4096], f32[" + t +
                               ", 12288], f32[" + t + ", 12288], f32[" + t + ", 32]) {\n  %y = matmul(%x, @w) : f32[" +
                               t + ", 4096]\n  %z = matmul_swiglu(%x, @g, @u) : f32[" + t +
                               ", 12288]\n  %a, %c = matmul_group(%x, @g, @b) : f32[" + t + ", 12288], f32[" + t +
                               ", 32]\n  return %y, %z, %a, %c\n}\n";
      auto m = ir::ParseModule(text);
      ASSERT_TRUE(m.ok()) << m.status();
      for (const ir::Op* op : (*m)->function("f")->Ops()) {
        if (op->is(ir::OpKind::kReturn)) continue;
        auto shapes = kc::ShapesAt(*op, T, kc::WeightMode::kBlocks);
        ASSERT_TRUE(shapes.ok()) << shapes.status();
        auto s = kc::SelectGpuOp(*op, *shapes, target, {kc::DecodeClass::kExact});
        ASSERT_TRUE(s.ok()) << s.status();
        EXPECT_TRUE(s->gemv) << d << " T=" << T << ": " << op->Summary() << " -> " << s->impl;
        for (const kc::Launch& l : s->launches) {
          EXPECT_NE(l.kernel.module.Key().find("GEMV_T=" + t), std::string::npos) << l.kernel.module.Key();
          mods.push_back(l.kernel.module);
        }
      }
    }
  ExpectCompilesForSm90(mods, "Gemv.cu multi-token");
}

// The MoE decode unit's launches (x and h quantized, the experts' gate/up, the fused down) at T = 1
// and 8, without and with a shared expert of the routed width: every module compiles for sm_90.
TEST(NvrtcCompileTest, MoeDecodeModulesCompileForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  namespace kc = kernels::cuda;
  auto m = ir::ParseModule(R"(weight @down : q4_K[8, 256, 512]
weight @gate : q4_K[8, 512, 256]
weight @up : q4_K[8, 512, 256]
weight @sg : q4_K[512, 256]
weight @su : q4_K[512, 256]
weight @sd : q4_K[256, 512]
weight @sgi : f32[1, 256]
func @f(%x: f32[T, 256], %w: f32[T, 2], %ids: i32[T, 2]) -> (f32[T, 256], f32[T, 256]) {
  %y = moe_experts(%x, %w, %ids, @down, @gate, @up) : f32[T, 256]
  %z = moe_ffn(%x, %w, %ids, @sgi, @sg, @su, @sd, @down, @gate, @up) : f32[T, 256]
  return %y, %z
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  auto target = kc::TargetPreset("sm_90");
  ASSERT_TRUE(target.ok());
  std::vector<ModuleSpec> mods;
  for (int64_t T : {1, 8}) {
    auto sel = kc::SelectionsOf(*(*m)->function("f"), T, *target, kc::WeightMode::kBlocks, /*use_records=*/false);
    ASSERT_TRUE(sel.ok()) << sel.status();
    for (const kc::OpSelection& s : *sel)
      for (const kc::Launch& l : s.launches) mods.push_back(l.kernel.module);
  }
  EXPECT_GE(mods.size(), 8u);
  ExpectCompilesForSm90(mods, "MoE decode");
}

// The attention prologue's one-launch forms: qk_norm_rope_pair (Rope.cu: q's rows then k's) at the
// head geometries the models take it for (Gemma 4's sliding heads of 256, Step 3.5's 128 with a
// partial rope, Qwen3.5's prefill, a 512-wide head) and kv_append_vnorm (Elementwise.cu: the
// values' norm in the append) for f32, 16-bit and q8_0 caches, with and without a ring.
TEST(NvrtcCompileTest, AttentionPrologueModulesCompileForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  std::vector<ModuleSpec> mods;
  for (auto [hq, hk, d, nrot] :
       std::vector<std::array<int64_t, 4>>{{16, 8, 256, 256}, {64, 8, 128, 64}, {16, 4, 256, 64}, {16, 2, 512, 512}}) {
    ModuleSpec m;
    m.file = "Rope.cu";
    m.defines =
        MakeDefines({Def("ROPE_HEADS", hq), Def("ROPE_HEADS_K", hk), Def("ROPE_DIM", d), Def("ROPE_NROT", nrot)});
    mods.push_back(m);
  }
  for (auto [width, dim, kt, vt, ring] : std::vector<std::array<int64_t, 5>>{
           {2048, 256, 0, 0, 0}, {2048, 256, 3, 1, 1024}, {1024, 512, 2, 2, 0}, {128, 64, 3, 3, 0}}) {
    ModuleSpec m;
    m.file = "Elementwise.cu";
    Defines defs = {Def("KV_WIDTH", width), Def("KV_HEAD_DIM", dim), Def("KV_KT", kt), Def("KV_VT", vt)};
    if (ring > 0) defs.push_back(Def("KV_RING", ring));
    m.defines = MakeDefines(std::move(defs));
    mods.push_back(m);
  }
  // qk_norm_rope_append: the pair's modules with the caches' types (and a ring).
  for (auto [hq, hk, d, nrot, kt, vt, ring] : std::vector<std::array<int64_t, 7>>{
           {32, 16, 256, 256, 0, 0, 0}, {64, 8, 128, 64, 3, 1, 1024}, {32, 4, 512, 512, 2, 2, 0}}) {
    ModuleSpec m;
    m.file = "Rope.cu";
    Defines defs = {Def("ROPE_HEADS", hq),  Def("ROPE_HEADS_K", hk), Def("ROPE_DIM", d),
                    Def("ROPE_NROT", nrot), Def("KV_KT", kt),        Def("KV_VT", vt)};
    if (ring > 0) defs.push_back(Def("KV_RING", ring));
    m.defines = MakeDefines(std::move(defs));
    mods.push_back(m);
  }
  ExpectCompilesForSm90(mods, "qk_norm_rope_pair, kv_append_vnorm, qk_norm_rope_append");
}

// MoeGemm.cu (the prefill expert products; no unit selects it yet): moe_sort at the expert counts
// the launches accept (the per-warp table's size depends on E) and moe_gemm for every storage it
// reads, plain and swiglu, grouped (the identity grouping is the same module).
TEST(NvrtcCompileTest, MoeGemmModulesCompileForSm90) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  namespace kc = kernels::cuda;
  const kc::Target target = *kc::TargetPreset("sm_90");
  std::vector<ModuleSpec> mods;
  std::set<std::string> seen;
  auto add = [&](const absl::StatusOr<kc::Launch>& l) {
    ASSERT_TRUE(l.ok()) << l.status();
    if (seen.insert(l->kernel.module.Key()).second) mods.push_back(l->kernel.module);
  };
  for (int64_t E : {1, 8, 256, 512, 1024}) add(kc::MoeSortLaunch(target, E, 32768));
  int storages = 0;
  for (ir::DType t : AllDTypes()) {
    if (!kc::MoeGemmReads(t)) continue;
    ++storages;
    // gate_up and down shapes: the weight ring's geometry (copy piece, stages) follows K.
    for (bool swiglu : {false, true})
      for (int64_t K : {2048, 512, 256}) add(kc::MoeGemmLaunch(target, t, K, 512, 256, 32768, swiglu, true));
  }
  EXPECT_EQ(storages, 16);  // 13 block formats + f32, f16, bf16
  ASSERT_GE(mods.size(), 5u + 2 * 16);
  ExpectCompilesForSm90(mods, "MoeGemm.cu");
}

TEST(NvrtcCompileTest, CompileErrorsNameTheModule) {
  auto nvrtc = Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  auto r = (*nvrtc)->CompileToCubin("extern \"C\" __global__ void k() { undefined_thing(); }", "bad.cu",
                                    {"-arch=sm_90"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("bad.cu"), std::string::npos) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("undefined_thing"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace memra::codegen
