// kernels/cuda/GemvQuant.cu, the decode GEMV on GGUF blocks. Host side (no GPU): the units
// apply only to weights on the device as blocks, the geometry and scratch of a selection, what
// is refused. On the GPU: every format it reads x T = 1..8 x matmul / matmul_group / matmul_swiglu
// x both activation paths (f32, q8 + dp4a), through the units' own Select and Bind, against a
// CPU reference: the blocks (formats::Quantize of random values, so every block is one ggml
// writes) dequantized with kernels/formats and dotted in f64. Outputs are NaN-poisoned (plus a
// guard past the end): a row the kernel does not write, or a token past the call's count that
// it does, fails. The q8 path is checked twice: against the exact product (bounded by the
// activation rounding) and against the product with x rounded as the kernel rounds it (tight).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/KernelCompiler.h"
#include "gtest/gtest.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "kernels/cuda/FixedBindContext.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GemvQuantParams.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/WeightLayout.h"
#include "kernels/formats/Quant.h"
#include "runtime/cuda/CudaDevice.h"
#include "tests/TestUtil.h"
#include "tests/cuda/CudaTestUtil.h"
#include "tests/cuda/GemvQuantReference.h"

namespace memra::kernels::cuda {
namespace {

using ir::DType;

constexpr DType kFormats[] = {DType::kQ8_0,  DType::kQ4_0,   DType::kQ4_1,  DType::kQ5_0, DType::kQ5_1,
                              DType::kQ2_K,  DType::kQ3_K,   DType::kQ4_K,  DType::kQ5_K, DType::kQ6_K,
                              DType::kMXFP4, DType::kIQ4_NL, DType::kIQ4_XS};

// A K whose rows end in a partial chunk and, for most formats, need copies narrower than 16 bytes
// (q8_0: 45 blocks = 1530 bytes; mxfp4: 765, an odd row; iq4_nl: 810, 2-byte copies; iq4_xs: 680,
// 8-byte copies).
int64_t TailK(DType t) { return ir::InfoOf(t).block_elems == 32 ? 1440 : 1280; }

enum class Kind { kMatMul, kGroup, kSwiglu };

struct Case {
  Kind kind = Kind::kMatMul;
  std::vector<DType> dtypes;  // per weight
  std::vector<int64_t> rows;  // per weight
  int64_t K = 0, T = 1;       // T: the tokens the op (and its selection) has
  int64_t n_tok = 1;          // the call's tokens (<= T)
  GemvQuantOptions options;

  std::string Name() const {
    std::vector<std::string> d;
    for (size_t i = 0; i < dtypes.size(); ++i) d.push_back(absl::StrCat(ir::DTypeName(dtypes[i]), "[", rows[i], "]"));
    return absl::StrCat(
        kind == Kind::kMatMul  ? "matmul"
        : kind == Kind::kGroup ? "matmul_group"
                               : "matmul_swiglu",
        " ", absl::StrJoin(d, ","), " K=", K, " T=", T, n_tok != T ? absl::StrCat(" n_tok=", n_tok) : "",
        options.x == GemvQuantX::kQ8 ? " x=q8" : " x=f32", options.rows ? absl::StrCat(" R=", options.rows) : "",
        options.stages ? absl::StrCat(" ST=", options.stages) : "");
  }
};

std::string ModuleText(const Case& c) {
  std::string s;
  for (size_t i = 0; i < c.dtypes.size(); ++i)
    absl::StrAppend(&s, "weight @w", i, " : ", ir::DTypeName(c.dtypes[i]), "[", c.rows[i], ", ", c.K, "]\n");
  std::vector<std::string> types, names;
  const size_t results = c.kind == Kind::kSwiglu ? 1 : c.dtypes.size();
  for (size_t i = 0; i < results; ++i) {
    types.push_back(absl::StrCat("f32[", c.T, ", ", c.rows[i], "]"));
    names.push_back(absl::StrCat("%y", i));
  }
  std::vector<std::string> ws;
  for (size_t i = 0; i < c.dtypes.size(); ++i) ws.push_back(absl::StrCat("@w", i));
  const char* op = c.kind == Kind::kMatMul ? "matmul" : c.kind == Kind::kGroup ? "matmul_group" : "matmul_swiglu";
  absl::StrAppend(&s, "func @f(%x: f32[", c.T, ", ", c.K, "]) -> (", absl::StrJoin(types, ", "), ") {\n  ",
                  absl::StrJoin(names, ", "), " = ", op, "(%x, ", absl::StrJoin(ws, ", "),
                  ") : ", absl::StrJoin(types, ", "), "\n  return ", absl::StrJoin(names, ", "), "\n}\n");
  return s;
}

const ir::Op& TheOp(const ir::Module& m) { return *m.function("f")->Ops().front(); }

const char* UnitFor(Kind k) {
  return k == Kind::kMatMul ? "gemv_q" : k == Kind::kGroup ? "gemv_q_group" : "gemv_q_swiglu";
}

// ---- host side ----

TEST(GemvQuantSelect, UnitsApplyOnlyToWeightsOnTheDeviceAsBlocks) {
  const Target t = *TargetPreset("sm_90");
  for (DType d : kFormats) {
    Case c{Kind::kMatMul, {d}, {512}, 4096, 1, 1, {}};
    auto m = ir::ParseModule(ModuleText(c));
    ASSERT_TRUE(m.ok()) << m.status();
    const ir::Op& op = TheOp(**m);
    auto shapes = ShapesAt(op, 1, WeightMode::kBlocks);
    ASSERT_TRUE(shapes.ok()) << shapes.status();
    auto s = SelectGpuOp(op, *shapes, t);
    ASSERT_TRUE(s.ok()) << s.status();
    // Blocks on the device: the unit applies; under --weights bf16 the 16-bit GEMV runs them.
    EXPECT_EQ(s->impl, "gemv_q") << ir::DTypeName(d);
    EXPECT_TRUE(GemvQuantBlocksOnDevice(d, shapes->layout(1))) << ir::DTypeName(d);
    auto bf16_shapes = ShapesAt(op, 1, WeightMode::kBf16);
    ASSERT_TRUE(bf16_shapes.ok()) << bf16_shapes.status();
    auto sb = SelectGpuOp(op, *bf16_shapes, t);
    ASSERT_TRUE(sb.ok()) << sb.status();
    EXPECT_NE(sb->impl, "gemv_q") << ir::DTypeName(d);
    EXPECT_TRUE(SelectGemvQuant(op, *shapes, t).has_value()) << ir::DTypeName(d);
  }
  EXPECT_FALSE(GemvQuantBlocksOnDevice(DType::kBF16, nullptr));
  EXPECT_FALSE(GemvQuantReads(DType::kF16));
  EXPECT_FALSE(GemvQuantReads(DType::kNVFP4));  // no reader (nor a GPU layout as blocks)
  for (DType d : kFormats) EXPECT_TRUE(GemvQuantReads(d)) << ir::DTypeName(d);
}

TEST(GemvQuantSelect, GeometryAndScratch) {
  const Target t = *TargetPreset("sm_90");
  {
    Case c{Kind::kMatMul, {DType::kQ4_K}, {4096}, 4096, 1, 1, {}};
    c.options.x = GemvQuantX::kF32;
    auto m = ir::ParseModule(ModuleText(c));
    ASSERT_TRUE(m.ok()) << m.status();
    auto s = SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), 1, WeightMode::kBlocks), t, c.options);
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->launches.size(), 1u);
    EXPECT_EQ(s->scratch_bytes, 0);
    const Launch& l = s->launches[0];
    EXPECT_EQ(l.kernel.entry, "gemv_q");
    EXPECT_EQ(l.kernel.module.Key(),
              "GemvQuant.cu<GQ_FMT=12,GQ_K=4096,GQ_MINB=1,GQ_R=2,GQ_ST=4,GQ_SWIGLU=0,GQ_T=1,GQ_WARPS=4,GQ_XQ=0>");
    EXPECT_EQ(l.block, 128u);
    EXPECT_EQ(l.grid, 512u);  // 2048 tiles of 2 rows, 4 warps per block
  }
  {
    // iq4_xs: 8 lanes per super-block (one 32-element sub-block each), 4 blocks = 544 bytes a chunk;
    // iq4_nl as the other 32-element formats (one lane per block).
    for (auto [d, key] : {std::pair<DType, const char*>{DType::kIQ4_XS,
                                                        "GemvQuant.cu<GQ_FMT=23,GQ_K=4096,"
                                                        "GQ_MINB=1,GQ_R=2,GQ_ST=4,GQ_SWIGLU=0,GQ_T=1,"
                                                        "GQ_WARPS=4,GQ_XQ=0>"},
                          std::pair<DType, const char*>{DType::kIQ4_NL,
                                                        "GemvQuant.cu<GQ_FMT=20,GQ_K=4096,"
                                                        "GQ_MINB=1,GQ_R=2,GQ_ST=4,GQ_SWIGLU=0,GQ_T=1,"
                                                        "GQ_WARPS=4,GQ_XQ=0>"}}) {
      Case c{Kind::kMatMul, {d}, {4096}, 4096, 1, 1, {}};
      c.options.x = GemvQuantX::kF32;
      auto m = ir::ParseModule(ModuleText(c));
      ASSERT_TRUE(m.ok()) << m.status();
      auto s = SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), 1, WeightMode::kBlocks), t, c.options);
      ASSERT_TRUE(s.has_value()) << ir::DTypeName(d);
      ASSERT_EQ(s->launches.size(), 1u);
      EXPECT_EQ(s->launches[0].kernel.module.Key(), key);
      EXPECT_EQ(s->launches[0].grid, 512u);
    }
  }
  {
    // q4_K / q5_K / q6_K with q8 x at T = 1: 4 rows a tile, at most 4 blocks per SM (the kernel
    // bench's sweep); q8_0 keeps 2 rows and a block per 4 tiles; T = 2 keeps 2 rows.
    for (auto [d, T, rows, grid] : {std::tuple<DType, int64_t, const char*, uint32_t>{DType::kQ4_K, 1, "GQ_R=4,", 528},
                                    {DType::kQ6_K, 1, "GQ_R=4,", 528},
                                    {DType::kQ4_K, 2, "GQ_R=2,", 528},
                                    {DType::kQ8_0, 1, "GQ_R=2,", 1536}}) {
      Case c{Kind::kMatMul, {d}, {12288}, 4096, T, T, {}};
      auto m = ir::ParseModule(ModuleText(c));
      ASSERT_TRUE(m.ok()) << m.status();
      auto s = SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), T, WeightMode::kBlocks), t);
      ASSERT_TRUE(s.has_value()) << c.Name();
      EXPECT_NE(s->launches.back().kernel.module.Key().find(rows), std::string::npos) << c.Name();
      EXPECT_EQ(s->launches.back().grid, grid) << c.Name();
    }
  }
  {
    // q8 activations: the quantization first (same module), scratch for T x K int8 + scales + sums.
    Case c{Kind::kSwiglu, {DType::kQ6_K, DType::kQ6_K}, {12288, 12288}, 5120, 8, 8, {}};
    c.options.x = GemvQuantX::kQ8;
    auto m = ir::ParseModule(ModuleText(c));
    ASSERT_TRUE(m.ok()) << m.status();
    auto s = SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), 8, WeightMode::kBlocks), t, c.options);
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->launches.size(), 2u);
    EXPECT_EQ(s->launches[0].kernel.entry, "gemv_q_quantize_x");
    EXPECT_EQ(s->launches[1].kernel.entry, "gemv_q_swiglu");
    EXPECT_EQ(s->launches[0].kernel.module.Key(), s->launches[1].kernel.module.Key());
    // 4,200-byte rows (not a multiple of 16): copies from the 16-byte boundary below each chunk.
    EXPECT_NE(s->launches[1].kernel.module.Key().find("GQ_REALIGN=1,"), std::string::npos);
    EXPECT_EQ(s->scratch_bytes, (8 * 5120 + 8 * 160 * 4 + 8 * 320 * 4 + 255) / 256 * 256);
    EXPECT_EQ(s->launches[1].grid, 132u * 4);  // q6_K: at most 4 blocks per SM (warps loop over tiles)
  }
  {
    // A group of mixed formats (the default q8 activations): x quantized once, then one launch per
    // format, in the order of the weights.
    Case c{Kind::kGroup, {DType::kQ4_K, DType::kQ6_K, DType::kQ4_K}, {256, 128, 32}, 1024, 1, 1, {}};
    auto m = ir::ParseModule(ModuleText(c));
    ASSERT_TRUE(m.ok()) << m.status();
    auto s = SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), 1, WeightMode::kBlocks), t);
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->launches.size(), 3u);
    EXPECT_EQ(s->launches[0].kernel.entry, "gemv_q_quantize_x");
    EXPECT_NE(s->launches[1].kernel.module.Key().find("GQ_FMT=12,"), std::string::npos);
    EXPECT_NE(s->launches[2].kernel.module.Key().find("GQ_FMT=14,"), std::string::npos);
  }
  {
    // q8 x staged per block: no extra launch, 8 warps, 2 resident blocks per SM; where x and a
    // 2-stage ring do not fit in a block's 48 KiB (q6_K at K = 17408), the launch of its own.
    Case c{Kind::kMatMul, {DType::kQ8_0}, {8192}, 4096, 1, 1, {}};
    c.options.x = GemvQuantX::kQ8Block;
    auto m = ir::ParseModule(ModuleText(c));
    ASSERT_TRUE(m.ok()) << m.status();
    auto s = SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), 1, WeightMode::kBlocks), t, c.options);
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->launches.size(), 1u);
    EXPECT_EQ(s->scratch_bytes, 0);
    const Launch& l = s->launches[0];
    EXPECT_NE(l.kernel.module.Key().find("GQ_MINB=2,"), std::string::npos) << l.kernel.module.Key();
    EXPECT_NE(l.kernel.module.Key().find("GQ_XQ=2>"), std::string::npos) << l.kernel.module.Key();
    EXPECT_EQ(l.block, 256u);
    EXPECT_EQ(l.grid, 132u * 2);  // 4096 tiles for 2112 warps: they loop
    Case big{Kind::kMatMul, {DType::kQ6_K}, {5120}, 17408, 1, 1, {}};
    big.options.x = GemvQuantX::kQ8Block;
    auto mb = ir::ParseModule(ModuleText(big));
    ASSERT_TRUE(mb.ok()) << mb.status();
    auto sb = SelectGemvQuant(TheOp(**mb), *ShapesAt(TheOp(**mb), 1, WeightMode::kBlocks), t, big.options);
    ASSERT_TRUE(sb.has_value());
    ASSERT_EQ(sb->launches.size(), 2u);
    EXPECT_EQ(sb->launches[0].kernel.entry, "gemv_q_quantize_x");
  }
}

// Streamed items (GQ_STREAM): never by default (measured slower, session 28); with stream = 1 where
// the static schedule leaves SMs idle: the 31B's ffn down (1,344 tiles of 4 rows: 336 blocks, 3 on
// 72 SMs and 2 on 60) and o-proj, with every resident slot as the grid and the counters and records
// after the q8 x; not where the tiles divide evenly (the head), not with f32 x; with stream = 2
// wherever it can run (at least two chunks a warp).
TEST(GemvQuantSelect, StreamedItemsWhereTilesDoNotDivideEvenly) {
  const Target t = *TargetPreset("sm_90");
  auto select = [&](Case c, int stream) {
    c.options.stream = stream;
    auto m = ir::ParseModule(ModuleText(c));
    EXPECT_TRUE(m.ok()) << m.status();
    return SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), c.T, WeightMode::kBlocks), t, c.options);
  };
  auto streamed = [](const OpSelection& s) {
    return s.launches.back().kernel.module.Key().find("GQ_STREAM=1") != std::string::npos;
  };
  const int64_t q8x = (21504 + 21504 / 32 * 4 + 21504 / 16 * 4 + 255) / 256 * 256;
  const Case down{Kind::kMatMul, {DType::kQ4_K}, {5376}, 21504, 1, 1, {}};
  {
    auto s = select(down, 1);
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->launches.size(), 2u);
    EXPECT_TRUE(streamed(*s));
    EXPECT_EQ(s->launches[1].grid, 132u * 4);
    // 1,344 counters (padded to 256 bytes), then 2 records of 32 floats for each of 2,112 warps.
    EXPECT_EQ(s->scratch_bytes, q8x + (1344 * 4 + 255) / 256 * 256 + 2112 * 2 * 32 * 4);
  }
  {
    auto s = select(down, 0);  // the default
    ASSERT_TRUE(s.has_value());
    EXPECT_FALSE(streamed(*s));
    EXPECT_EQ(s->launches[1].grid, 336u);
    EXPECT_EQ(s->scratch_bytes, q8x);
  }
  EXPECT_TRUE(streamed(*select({Kind::kMatMul, {DType::kQ4_K}, {5376}, 8192, 1, 1, {}}, 1)));
  // The head's 65,536 tiles: 31 or 32 a warp, within 3 % of even.
  const Case head{Kind::kMatMul, {DType::kQ6_K}, {262144}, 5376, 1, 1, {}};
  EXPECT_FALSE(streamed(*select(head, 1)));
  EXPECT_TRUE(streamed(*select(head, 2)));
  Case f32 = down;
  f32.options.x = GemvQuantX::kF32;
  EXPECT_FALSE(streamed(*select(f32, 2)));
  // Too few chunks for the warps (fewer than two each): never streamed, even when asked.
  EXPECT_FALSE(streamed(*select({Kind::kMatMul, {DType::kQ4_K}, {2816}, 4096, 1, 1, {}}, 2)));
}

// Every selection's shared memory (the rings, their mbarriers, x staged per block) fits the target
// at every format, K, T and activation path: a module over the budget fails in ptxas on the device
// (the mbarriers, 8 bytes a stage, once did at q5_0 K = 1440 staged). The MoE forms too.
TEST(GemvQuantSelect, SharedMemoryFitsEverySelection) {
  const Target t = *TargetPreset("sm_90");
  int checked = 0;
  for (DType d : kFormats)
    for (int64_t K : {256, 704, 1280, 1440, 2816, 4096, 5120, 12288, 17408})
      for (int64_t T : {1, 2, 5, 8})
        for (Kind kind : {Kind::kMatMul, Kind::kSwiglu})
          for (GemvQuantX x : {GemvQuantX::kF32, GemvQuantX::kQ8, GemvQuantX::kQ8Block}) {
            if (K % ir::InfoOf(d).block_elems != 0) continue;
            Case c{kind, {d, d}, {64, 64}, K, T, T, {}};
            if (kind == Kind::kMatMul) c.dtypes.resize(1), c.rows.resize(1);
            c.options.x = x;
            auto m = ir::ParseModule(ModuleText(c));
            ASSERT_TRUE(m.ok()) << m.status();
            auto s = SelectGemvQuant(TheOp(**m), *ShapesAt(TheOp(**m), T, WeightMode::kBlocks), t, c.options);
            ASSERT_TRUE(s.has_value()) << c.Name();
            for (const Launch& l : s->launches) {
              if (l.kernel.entry == "gemv_q_quantize_x") continue;
              const int64_t bytes = GemvQuantSmemBytes(l);
              EXPECT_GT(bytes, 0) << c.Name();
              EXPECT_LE(bytes, t.smem_per_block) << c.Name() << " " << l.kernel.module.Key();
              ++checked;
            }
          }
  for (DType d : kFormats)
    for (int64_t K : {256, 512, 704, 1280, 2816, 4096})
      for (bool swiglu : {false, true}) {
        if (K % ir::InfoOf(d).block_elems != 0) continue;
        auto l = GemvQuantMoeLaunch(t, d, K, 9, swiglu, 8, 1280, 1, 1280);
        ASSERT_TRUE(l.has_value()) << ir::DTypeName(d) << " K=" << K;
        EXPECT_LE(GemvQuantSmemBytes(*l), t.smem_per_block) << l->kernel.module.Key();
        auto down = GemvQuantMoeDownLaunch(t, d, K, 9, 1, 4096);
        ASSERT_TRUE(down.has_value()) << ir::DTypeName(d) << " K=" << K;
        EXPECT_LE(GemvQuantSmemBytes(*down), t.smem_per_block) << down->kernel.module.Key();
        checked += 2;
      }
  EXPECT_GT(checked, 1000);
  Launch other;
  other.kernel.module.file = "Gemv.cu";
  EXPECT_EQ(GemvQuantSmemBytes(other), -1);
}

// A launch's define `name` ("-" when it has none).
std::string define(const Launch& l, const std::string& name) {
  for (const auto& [n, v] : l.kernel.module.defines)
    if (n == name) return v;
  return "-";
}

// The MoE gate/up's rows a tile (4 where a row's last chunk is partial, else 1: bench/RESULTS.md
// session 25) and the ring's stages: no more than the chunks a warp runs (a decode step gives a warp
// one tile), unless asked for.
TEST(GemvQuantSelect, MoeGateUpRowsAndStages) {
  const Target t = *TargetPreset("sm_90");
  // Gemma 4 26B-A4B: K = 2816 is 11 q4_K blocks (8 a chunk: the second chunk partial); 8 slots x 704.
  auto gemma = GemvQuantMoeLaunch(t, DType::kQ4_K, 2816, 1, true, 8, 704, 0, 0);
  ASSERT_TRUE(gemma.has_value());
  EXPECT_EQ(define(*gemma, "GQ_R"), "4");
  const unsigned warps = static_cast<unsigned>(std::stoi(define(*gemma, "GQ_WARPS")));
  EXPECT_EQ(gemma->grid, (8u * 704 / 4 + warps - 1) / warps);  // 1408 tiles, one a warp
  EXPECT_EQ(define(*gemma, "GQ_ST"), "2");                     // a warp's one tile is 2 chunks
  // Step 3.5: K = 4096 is 2 whole chunks of q4_K: a row a tile, 2 chunks a warp.
  auto step = GemvQuantMoeLaunch(t, DType::kQ4_K, 4096, 1, true, 8, 1280, 1, 1280);
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(define(*step, "GQ_R"), "1");
  EXPECT_EQ(define(*step, "GQ_ST"), "2");
  // A capped grid gives each warp more tiles, so more stages fill (up to the ring's budget).
  GemvQuantOptions capped;
  capped.max_blocks = 132;
  auto longer = GemvQuantMoeLaunch(t, DType::kQ4_K, 4096, 1, true, 8, 1280, 1, 1280, capped);
  ASSERT_TRUE(longer.has_value());
  EXPECT_EQ(longer->grid, 132u);
  EXPECT_EQ(std::stoi(define(*longer, "GQ_ST")), 4);
  // Asked-for geometry is kept.
  GemvQuantOptions asked;
  asked.rows = 1;
  asked.stages = 3;
  asked.min_blocks = 6;
  auto kept = GemvQuantMoeLaunch(t, DType::kQ4_K, 2816, 1, true, 8, 704, 0, 0, asked);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(define(*kept, "GQ_R"), "1");
  EXPECT_EQ(define(*kept, "GQ_ST"), "3");
  EXPECT_EQ(define(*kept, "GQ_MINB"), "6");
  EXPECT_LE(GemvQuantSmemBytes(*kept), t.smem_per_block);
}

// gemv_q_moe_down's packing (choices side by side where a row takes at most half the warp) and
// split (a block's warps share a tile; not for q6_K's unpacked rows), as bench/RESULTS.md session 24
// measured them; the grid: a block a tile when split, a warp a tile otherwise.
TEST(GemvQuantSelect, MoeDownPacksAndSplits) {
  const Target t = *TargetPreset("sm_90");
  struct Want {
    DType d;
    int64_t F;
    const char* pack;
    const char* split;
  };
  // Qwen3.5-35B-A3B (F = 512): q4_K / q6_K 2 blocks, 8 lanes -> 4 a chunk; q8_0 16 lanes -> 2.
  // Step 3.5 (F = 1280): 20 lanes (q4_K, q6_K), 40 (q8_0: two chunks) -> unpacked; q6_K not split.
  for (const Want& w :
       {Want{DType::kQ4_K, 512, "4", "1"}, Want{DType::kQ6_K, 512, "4", "1"}, Want{DType::kQ8_0, 512, "2", "1"},
        Want{DType::kQ4_K, 1280, "-", "1"}, Want{DType::kQ6_K, 1280, "-", "-"}, Want{DType::kQ8_0, 1280, "-", "1"},
        Want{DType::kQ8_0, 704, "-", "1"}}) {
    auto l = GemvQuantMoeDownLaunch(t, w.d, w.F, 9, 1, 4096);
    ASSERT_TRUE(l.has_value()) << ir::DTypeName(w.d) << " F=" << w.F;
    EXPECT_EQ(l->kernel.entry, "gemv_q_moe_down");
    EXPECT_EQ(define(*l, "GQ_PACK"), w.pack) << ir::DTypeName(w.d) << " F=" << w.F;
    EXPECT_EQ(define(*l, "GQ_SPLIT"), w.split) << ir::DTypeName(w.d) << " F=" << w.F;
    EXPECT_EQ(define(*l, "GQ_R"), "4") << l->kernel.module.Key();
    // 1024 tiles of 4 rows: a block each when split, else a warp each (fewer warps where 4 rows'
    // stages would pass the block's shared memory).
    const unsigned warps = static_cast<unsigned>(std::stoi(define(*l, "GQ_WARPS")));
    EXPECT_EQ(l->grid, std::string(w.split) == "1" ? 1024u : (1024u + warps - 1) / warps) << l->kernel.module.Key();
    EXPECT_LE(GemvQuantSmemBytes(*l), t.smem_per_block);
  }
  // The overrides memra-kernel-bench measures: unpacked, not split.
  GemvQuantOptions o;
  o.pack = 1;
  o.split = 1;
  auto l = GemvQuantMoeDownLaunch(t, DType::kQ4_K, 512, 9, 1, 4096, o);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(define(*l, "GQ_PACK"), "-");
  EXPECT_EQ(define(*l, "GQ_SPLIT"), "-");
  // The gate/up form never packs or splits.
  auto gu = GemvQuantMoeLaunch(t, DType::kQ4_K, 2048, 1, true, 8, 512, 1, 512);
  ASSERT_TRUE(gu.has_value());
  EXPECT_EQ(define(*gu, "GQ_PACK"), "-");
  EXPECT_EQ(define(*gu, "GQ_SPLIT"), "-");
}

TEST(GemvQuantSelect, Refusals) {
  const Target t = *TargetPreset("sm_90");
  auto select = [&](const Case& c) {
    auto m = ir::ParseModule(ModuleText(c));
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return true;
    auto shapes = ShapesAt(TheOp(**m), c.T, WeightMode::kBlocks);
    if (!shapes.ok()) return false;  // a type without a GPU layout (refused before any unit)
    return SelectGemvQuant(TheOp(**m), *shapes, t).has_value();
  };
  EXPECT_TRUE(select({Kind::kMatMul, {DType::kQ8_0}, {64}, 256, 8, 8, {}}));
  EXPECT_FALSE(select({Kind::kMatMul, {DType::kQ8_0}, {64}, 256, 9, 9, {}}));    // T > 8: a GEMM
  EXPECT_FALSE(select({Kind::kMatMul, {DType::kBF16}, {64}, 256, 1, 1, {}}));    // not a block format
  EXPECT_FALSE(select({Kind::kMatMul, {DType::kNVFP4}, {64}, 256, 1, 1, {}}));   // no reader
  EXPECT_FALSE(select({Kind::kMatMul, {DType::kIQ4_XS}, {64}, 384, 1, 1, {}}));  // K not a multiple of 256
  EXPECT_TRUE(select({Kind::kMatMul, {DType::kIQ4_NL}, {64}, 384, 1, 1, {}}));
  EXPECT_FALSE(select({Kind::kSwiglu, {DType::kQ4_K, DType::kQ6_K}, {64, 64}, 256, 1, 1, {}}));  // two formats
  EXPECT_FALSE(select({Kind::kGroup, {DType::kQ4_K, DType::kF16}, {64, 64}, 256, 1, 1, {}}));
}

// ---- GPU ----

using runtime::cuda::CudaDevice;
using runtime::cuda::DeviceBuffer;
using runtime::cuda::LoadedModule;

using gemv_quant_reference::kGuard;
using gemv_quant_reference::kPoison;
using gemv_quant_reference::RoundLikeQ8;

class GemvQuantGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    memra::testing::GpuKernelEnv env;
    memra::testing::OpenGpuKernelEnv("memra-gemvq-cache", env);
    skip_ = env.skip;
    dev_ = env.dev;
    compiler_ = env.compiler;
  }
  static void TearDownTestSuite() {
    if (!rows_.empty()) {
      std::printf("\n%-80s %11s %9s %11s %9s  %s\n", "case", "nmse", "bound", "nmse(x~)", "bound", "result");
      int fails = 0;
      for (const auto& r : rows_) {
        std::printf("%s\n", r.c_str());
        fails += r.find("FAIL") != std::string::npos;
      }
      std::printf("gemv_q table: %zu cases, %d failed\n", rows_.size(), fails);
    }
    modules_.clear();
    delete compiler_;
    delete dev_;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << "no GPU: " << skip_;
  }

  // Compiles every module the cases select (in one parallel batch).
  static void Precompile(const std::vector<ModuleSpec>& mods) {
    std::vector<ModuleSpec> todo;
    std::set<std::string> seen;
    for (const ModuleSpec& m : mods)
      if (!modules_.count(m.Key()) && seen.insert(m.Key()).second) todo.push_back(m);
    if (todo.empty()) return;
    auto cubins = compiler_->CompileAll(todo);
    ASSERT_TRUE(cubins.ok()) << cubins.status();
    for (size_t i = 0; i < todo.size(); ++i) {
      auto l = LoadedModule::Load(*dev_, *(*cubins)[i], todo[i].Key());
      ASSERT_TRUE(l.ok()) << l.status();
      modules_[todo[i].Key()] = std::move(*l);
    }
  }

  static std::optional<OpSelection> SelectCase(const Case& c, std::unique_ptr<ir::Module>* keep) {
    auto m = ir::ParseModule(ModuleText(c));
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return std::nullopt;
    auto shapes = ShapesAt(TheOp(**m), c.T, WeightMode::kBlocks);
    EXPECT_TRUE(shapes.ok());
    auto s = SelectGemvQuant(TheOp(**m), *shapes, dev_->target(), c.options);
    *keep = std::move(*m);
    return s;
  }

  // Runs the cases (compiling their modules first) and checks each.
  void RunAll(const std::vector<Case>& cases) {
    std::vector<ModuleSpec> mods;
    for (const Case& c : cases) {
      std::unique_ptr<ir::Module> m;
      auto s = SelectCase(c, &m);
      ASSERT_TRUE(s.has_value()) << c.Name() << ": not selected";
      for (const Launch& l : s->launches) mods.push_back(l.kernel.module);
    }
    Precompile(mods);
    if (HasFatalFailure()) return;
    for (size_t i = 0; i < cases.size(); ++i) Run(cases[i], static_cast<uint32_t>(1000 + i));
  }

  void Run(const Case& c, uint32_t seed) {
    SCOPED_TRACE(c.Name());
    std::unique_ptr<ir::Module> module;
    auto sel = SelectCase(c, &module);
    ASSERT_TRUE(sel.has_value());
    const ir::Op& op = TheOp(*module);
    auto shapes = ShapesAt(op, c.T, WeightMode::kBlocks);
    ASSERT_TRUE(shapes.ok());
    const auto& d = dev_->driver();
    const int64_t K = c.K, T = c.T, n_tok = c.n_tok;

    // Weights: quantized random rows, uploaded as blocks; the reference dequantizes them.
    std::vector<DeviceBuffer> wbuf;
    std::vector<DeviceMatrix> mats;
    std::vector<std::vector<float>> deq;
    for (size_t i = 0; i < c.dtypes.size(); ++i) {
      const DType t = c.dtypes[i];
      const auto gt = static_cast<formats::GgmlType>(ir::InfoOf(t).ggml_id);
      const int64_t rb = *ir::StorageBytes(t, K);
      std::vector<float> v = testing::RandomNormal(static_cast<size_t>(c.rows[i] * K), seed * 31 + i, 0.5f);
      std::vector<uint8_t> blocks(static_cast<size_t>(rb * c.rows[i]));
      for (int64_t r = 0; r < c.rows[i]; ++r)
        ASSERT_TRUE(
            formats::Quantize(gt, absl::MakeConstSpan(v.data() + r * K, K), absl::MakeSpan(blocks.data() + r * rb, rb))
                .ok());
      std::vector<float> back(v.size());
      ASSERT_TRUE(formats::Dequantize(gt, blocks, absl::MakeSpan(back)).ok());
      deq.push_back(std::move(back));
      // As the executor holds block matrices: spare zero bytes after (realigned copies read them).
      const size_t payload = blocks.size();
      blocks.resize(payload + kGemvQuantMatrixTailBytes, 0);
      auto b = dev_->Alloc(blocks.size(), "w");
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_TRUE(dev_->Upload(b->ptr(), blocks.data(), blocks.size()).ok());
      blocks.resize(payload);
      DeviceMatrix m;
      m.data = b->ptr();
      m.rows = c.rows[i];
      m.cols = K;
      m.stored = t;
      m.bytes = static_cast<int64_t>(blocks.size());
      mats.push_back(m);
      wbuf.push_back(std::move(*b));
    }
    // x: T rows, the ones past the call's tokens NaN (reading them would show).
    std::vector<float> x = testing::RandomNormal(static_cast<size_t>(T * K), seed, 1.0f);
    for (int64_t i = n_tok * K; i < T * K; ++i) x[i] = std::nanf("");
    auto xb = dev_->Alloc(x.size() * 4, "x");
    ASSERT_TRUE(xb.ok());
    ASSERT_TRUE(dev_->Upload(xb->ptr(), x.data(), x.size() * 4).ok());
    // Outputs [T, N] + a guard, poisoned.
    const size_t outs = c.kind == Kind::kSwiglu ? 1 : c.dtypes.size();
    std::vector<DeviceBuffer> ybuf;
    std::vector<uint64_t> yptr;
    for (size_t i = 0; i < outs; ++i) {
      auto b = dev_->Alloc(static_cast<size_t>(T * c.rows[i] + kGuard) * 4, "y");
      ASSERT_TRUE(b.ok());
      ASSERT_EQ(d.cuMemsetD32Async(b->ptr(), kPoison, T * c.rows[i] + kGuard, dev_->stream()), 0);
      yptr.push_back(b->ptr());
      ybuf.push_back(std::move(*b));
    }
    DeviceBuffer scratch;
    if (sel->scratch_bytes > 0) {
      auto b = dev_->Alloc(sel->scratch_bytes, "scratch");
      ASSERT_TRUE(b.ok());
      ASSERT_EQ(d.cuMemsetD32Async(b->ptr(), kPoison, sel->scratch_bytes / 4, dev_->stream()), 0);
      scratch = std::move(*b);
    }

    // Bind through the unit and launch what it asks for.
    const GpuOpImpl* unit = FindGpuOpImpl(UnitFor(c.kind));
    ASSERT_NE(unit, nullptr);
    FixedBindContext ctx(op, *sel, *shapes, xb->ptr(), n_tok, mats, yptr, scratch.ptr());
    DeviceWork work;
    absl::Status bind = unit->Bind(ctx, work);
    ASSERT_TRUE(bind.ok()) << bind;
    for (const DeviceAction& a : work.actions()) {
      const auto* k = std::get_if<KernelCall>(&a);
      ASSERT_NE(k, nullptr);
      ASSERT_LT(k->launch, sel->launches.size());
      const Launch& l = sel->launches[k->launch];
      auto fn = modules_.at(l.kernel.module.Key())->Function(l.kernel.entry);
      ASSERT_TRUE(fn.ok()) << fn.status();
      void* args[] = {const_cast<unsigned char*>(k->params.bytes.data())};
      ASSERT_EQ(d.cuLaunchKernel(*fn, l.grid, 1, 1, l.block, 1, 1, l.smem, dev_->stream(), args, nullptr), 0)
          << l.kernel.ToString();
    }
    ASSERT_TRUE(dev_->Synchronize("gemv_q").ok());

    // Reference: exact x, and x rounded as the q8 path rounds it.
    const bool q8 = c.options.x == GemvQuantX::kQ8 || c.options.x == GemvQuantX::kQ8Block;
    const std::vector<float> xr = q8 ? RoundLikeQ8(x) : x;
    std::vector<std::vector<uint32_t>> bits(outs);
    for (size_t o = 0; o < outs; ++o) {
      bits[o].resize(static_cast<size_t>(T * c.rows[o] + kGuard));
      ASSERT_TRUE(dev_->Download(bits[o].data(), yptr[o], bits[o].size() * 4).ok());
    }
    const auto score =
        gemv_quant_reference::ScoreOutputs(c.kind == Kind::kSwiglu, deq, c.rows, K, T, n_tok, x, xr, bits);
    const double nmse = score.nmse, nmse_r = score.nmse_r;
    const int unwritten = score.unwritten, overwritten = score.overwritten;
    // f32: accumulation order only. q8: the activation rounding (~3e-5 for normal x) against the
    // exact product; accumulation order only against x rounded the same way.
    const double bound = q8 ? 3e-4 : 1e-9, bound_r = 1e-9;
    const bool ok = unwritten == 0 && overwritten == 0 && nmse <= bound && nmse_r <= bound_r;
    rows_.push_back(absl::StrFormat(
        "%-80s %11.3e %9.1e %11.3e %9.1e  %s%s", c.Name(), nmse, bound, nmse_r, bound_r, ok ? "ok" : "FAIL",
        unwritten || overwritten ? absl::StrCat("  ", unwritten, " unwritten, ", overwritten, " overwritten") : ""));
    EXPECT_EQ(unwritten, 0) << "outputs left poisoned (or non-finite)";
    EXPECT_EQ(overwritten, 0) << "writes past the call's tokens or the output";
    EXPECT_LE(nmse, bound);
    EXPECT_LE(nmse_r, bound_r);
  }

  static std::string skip_;
  static CudaDevice* dev_;
  static codegen::KernelCompiler* compiler_;
  static std::map<std::string, std::unique_ptr<LoadedModule>> modules_;
  static std::vector<std::string> rows_;
};
std::string GemvQuantGpuTest::skip_;
CudaDevice* GemvQuantGpuTest::dev_ = nullptr;
codegen::KernelCompiler* GemvQuantGpuTest::compiler_ = nullptr;
std::map<std::string, std::unique_ptr<LoadedModule>> GemvQuantGpuTest::modules_;
std::vector<std::string> GemvQuantGpuTest::rows_;

Case WithX(Case c, GemvQuantX x) {
  c.options.x = x;
  return c;
}

// Per format: matmul at T = 1, 2, 5, 8 (rows ending in a partial chunk, narrow copies), a 4096-K
// matmul, a group of three (one of 5 rows), swiglu, and a call with fewer tokens than selected.
TEST_F(GemvQuantGpuTest, EveryFormatTokensAndFusedForms) {
  std::vector<Case> cases;
  for (DType d : kFormats)
    for (GemvQuantX x : {GemvQuantX::kF32, GemvQuantX::kQ8, GemvQuantX::kQ8Block}) {
      const int64_t k = TailK(d);
      for (int64_t t : {1, 2, 5, 8}) cases.push_back(WithX({Kind::kMatMul, {d}, {300}, k, t, t, {}}, x));
      cases.push_back(WithX({Kind::kMatMul, {d}, {257}, 4096, 1, 1, {}}, x));
      for (int64_t t : {1, 8}) {
        cases.push_back(WithX({Kind::kGroup, {d, d, d}, {96, 37, 5}, k, t, t, {}}, x));
        cases.push_back(WithX({Kind::kSwiglu, {d, d}, {300, 300}, k, t, t, {}}, x));
      }
      cases.push_back(WithX({Kind::kMatMul, {d}, {300}, k, 8, 5, {}}, x));
      cases.push_back(WithX({Kind::kSwiglu, {d, d}, {300, 300}, k, 8, 3, {}}, x));
    }
  RunAll(cases);
}

// Geometry variants: rows per tile, ring depth, a grid capped below the tiles (warps loop),
// mixed-format groups, 8-byte copies (q6_K at K = 5120), the 27B-sized K.
TEST_F(GemvQuantGpuTest, GeometryVariants) {
  std::vector<Case> cases;
  for (GemvQuantX x : {GemvQuantX::kF32, GemvQuantX::kQ8, GemvQuantX::kQ8Block}) {
    for (int r : {1, 2, 3, 4})
      for (int st : {2, 4}) {
        Case c{Kind::kMatMul, {DType::kQ4_K}, {203}, 2048, 3, 3, {}};
        c.options.rows = r;
        c.options.stages = st;
        cases.push_back(WithX(c, x));
        Case q{Kind::kMatMul, {DType::kQ8_0}, {203}, 2048, 1, 1, {}};
        q.options.rows = r;
        q.options.stages = st;
        cases.push_back(WithX(q, x));
      }
    Case big{Kind::kMatMul, {DType::kQ4_K}, {70001}, 256, 1, 1, {}};  // warps loop over 5+ tiles
    big.options.rows = 1;
    big.options.max_blocks = 3001;
    cases.push_back(WithX(big, x));
    cases.push_back(WithX({Kind::kGroup,
                           {DType::kQ4_K, DType::kQ6_K, DType::kQ4_K, DType::kQ8_0, DType::kQ4_K},
                           {64, 48, 32, 16, 8},
                           1024,
                           2,
                           2,
                           {}},
                          x));
    cases.push_back(WithX({Kind::kMatMul, {DType::kQ6_K}, {130}, 5120, 1, 1, {}}, x));
    cases.push_back(WithX({Kind::kSwiglu, {DType::kQ8_0, DType::kQ8_0}, {64, 64}, 17408, 2, 2, {}}, x));
  }
  RunAll(cases);
}

// Streamed items (GQ_STREAM: warps start and end inside tiles, the last to arrive adds the parts):
// forced on small grids (a warp inside one tile, swiglu, a group, realigned q6_K, two tokens), and
// by the balance rule (stream = 1) at the 31B's ffn down and o-proj shapes (the scratch NaN-poisoned:
// gemv_q_quantize_x must zero the counters).
TEST_F(GemvQuantGpuTest, StreamedItems) {
  std::vector<Case> cases;
  auto forced = [](Case c, int max_blocks, int rows = 0) {
    c.options.x = GemvQuantX::kQ8;
    c.options.stream = 2;
    c.options.max_blocks = max_blocks;
    c.options.rows = rows;
    return c;
  };
  cases.push_back(forced({Kind::kMatMul, {DType::kQ4_K}, {37}, 12288, 1, 1, {}}, 3));
  cases.push_back(forced({Kind::kSwiglu, {DType::kQ4_K, DType::kQ4_K}, {29, 29}, 12288, 1, 1, {}}, 5));
  cases.push_back(forced({Kind::kGroup, {DType::kQ4_K, DType::kQ4_K, DType::kQ4_K}, {20, 7, 3}, 4096, 1, 1, {}}, 1));
  cases.push_back(forced({Kind::kMatMul, {DType::kQ6_K}, {23}, 5120, 1, 1, {}}, 1));
  cases.push_back(forced({Kind::kMatMul, {DType::kQ4_K}, {37}, 4096, 2, 2, {}}, 2, 2));
  cases.push_back(forced({Kind::kMatMul, {DType::kQ8_0}, {3}, 12288, 1, 1, {}}, 2, 1));
  cases.push_back(forced({Kind::kMatMul, {DType::kQ4_K}, {3001}, 12288, 1, 1, {}}, 132 * 4));
  for (int64_t k : {21504, 8192}) {
    Case c{Kind::kMatMul, {DType::kQ4_K}, {5376}, k, 1, 1, {}};
    c.options.x = GemvQuantX::kQ8;  // (the test's bound follows the option)
    c.options.stream = 1;
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    std::unique_ptr<ir::Module> m;
    auto s = SelectCase(c, &m);
    ASSERT_TRUE(s.has_value()) << c.Name();
    EXPECT_NE(s->launches.back().kernel.module.Key().find("GQ_STREAM=1"), std::string::npos) << c.Name();
  }
  RunAll(cases);
}

}  // namespace
}  // namespace memra::kernels::cuda
