// The GPU op units' host side, without a GPU: the target description, module keys, the selection
// record on the IR (written, read back, refused when malformed or stale), the weight layouts'
// repackers, and one parameter block. The kernels themselves are checked on the H200 by
// tests/cuda/OpTable_test.
#include <gtest/gtest.h>

#include <cstring>

#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "kernels/cuda/GemvParams.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/WeightLayout.h"
#include "kernels/formats/Quant.h"
#include "runtime/plan/Plan.h"

namespace memra::kernels::cuda {
namespace {

constexpr char kModule[] = R"(weight @norm : f32[64]
weight @w : bf16[128, 64]
weight @q : q8_0[128, 64]
func @decode(%x: f32[1, 64]) -> (f32[1, 128], f32[1, 128]) attributes {bucket = 1} {
  %n = rms_norm(%x, @norm) {eps = 1e-06} : f32[1, 64]
  %y = matmul(%n, @w) : f32[1, 128]
  %z = matmul(%n, @q) : f32[1, 128]
  return %y, %z
}
)";

TEST(Target, PresetsSerializeAndParseBack) {
  auto t = TargetPreset("sm_90");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->sm_count, 132);
  EXPECT_EQ(t->ArchName(), "sm_90");
  auto back = Target::Parse(t->Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Serialize(), t->Serialize());
  EXPECT_TRUE(TargetPreset("sm_90a").ok());
  EXPECT_EQ(TargetPreset("sm_80")->sm_count, 108);
}

TEST(Target, UnknownPresetAndBadLinesAreNamed) {
  auto t = TargetPreset("gfx90");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("presets: sm_80, sm_89, sm_90"), std::string::npos) << t.status();
  EXPECT_FALSE(Target::Parse("sm_count=132").ok());            // no arch
  EXPECT_FALSE(Target::Parse("arch=sm_90 sm_count=0").ok());   // no SMs
  EXPECT_FALSE(Target::Parse("arch=sm_90 bogus=1").ok());      // unknown field
  EXPECT_FALSE(Target::Parse("arch=sm_90 l2_bytes=-5").ok());  // negative
}

TEST(Target, MismatchesNameTheField) {
  Target a = *TargetPreset("sm_90"), b = a;
  EXPECT_TRUE(SelectionMismatches(a, b).empty());
  b.sm_count = 114;
  b.l2_bytes = 1;  // not a selection field
  auto d = SelectionMismatches(a, b);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "sm_count: compiled 132, device 114");
}

TEST(Target, APlanForAnotherGpuIsRefusedNamingTheField) {
  runtime::Plan plan;
  Target compiled = *TargetPreset("sm_90");
  plan.target = compiled.Serialize();
  EXPECT_TRUE(runtime::CheckPlanTarget(plan, compiled).ok());
  Target h100_pcie = compiled;
  h100_pcie.name = "NVIDIA H100 PCIe";
  h100_pcie.sm_count = 114;
  absl::Status st = runtime::CheckPlanTarget(plan, h100_pcie);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sm_count: compiled 132, device 114"), std::string::npos) << st;
  plan.target.clear();  // a plan from before targets were recorded: the IR's kernel_* fields decide
  EXPECT_TRUE(runtime::CheckPlanTarget(plan, h100_pcie).ok());
}

TEST(KernelSpec, KeysParseBack) {
  ModuleSpec m;
  m.file = "Norm.cu";
  m.defines = MakeDefines({Def("NORM_COLS", 64), Def("NORM_BLOCK", 64)});
  m.sm_90a = true;
  KernelSpec k{m, "rms_norm"};
  auto back = ParseKernelName(k.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToString(), k.ToString());
  EXPECT_TRUE(back->module.sm_90a);
  EXPECT_FALSE(ParseKernelName("Norm.cu<A=1>").ok());     // no entry
  EXPECT_FALSE(ParseModuleKey("Norm.cu<B=1,A=2>").ok());  // unsorted
  EXPECT_FALSE(ParseModuleKey("Norm.cu<A>").ok());        // not NAME=VALUE
  EXPECT_TRUE(ParseModuleKey("Elementwise.cu<>").ok());
}

TEST(Selection, WrittenRecordsReadBackAndDriveSelectionsOf) {
  auto m = ir::ParseModule(kModule);
  ASSERT_TRUE(m.ok()) << m.status();
  const Target t = *TargetPreset("sm_90");
  ir::Function& fn = *(*m)->function("decode");
  ASSERT_TRUE(IsStaticFunction(fn));
  std::vector<OpSelection> fresh;
  for (ir::Op* op : fn.Ops()) {
    auto shapes = ShapesAt(*op, 1);
    ASSERT_TRUE(shapes.ok()) << shapes.status();
    auto s = SelectGpuOp(*op, *shapes, t);
    ASSERT_TRUE(s.ok()) << s.status();
    WriteSelection(*s, *op);
    fresh.push_back(*s);
  }
  // One token through bf16 and q8_0 (its bf16 layout) weights: the GEMV; the norm: a row kernel.
  EXPECT_EQ(fresh[0].impl, "row_norm");
  EXPECT_EQ(fresh[1].impl, "gemv");
  EXPECT_EQ(fresh[2].impl, "gemv");
  EXPECT_EQ(fresh[2].launches[0].kernel.module.Key(), "Gemv.cu<GEMV_K=64,GEMV_W=2,GEMV_WARPS=8>");
  EXPECT_FALSE(fn.Ops().back()->attrs().Has("impl"));  // return: an alias, not recorded
  auto read = SelectionsOf(fn, 1, t, /*use_records=*/true);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), fresh.size());
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ((*read)[i].impl, fresh[i].impl);
    ASSERT_EQ((*read)[i].launches.size(), fresh[i].launches.size());
    for (size_t l = 0; l < fresh[i].launches.size(); ++l) {
      EXPECT_EQ((*read)[i].launches[l].kernel.ToString(), fresh[i].launches[l].kernel.ToString());
      EXPECT_EQ((*read)[i].launches[l].grid, fresh[i].launches[l].grid);
      EXPECT_EQ((*read)[i].launches[l].block, fresh[i].launches[l].block);
    }
  }
}

TEST(Selection, MalformedAndMissingRecordsAreRefused) {
  auto m = ir::ParseModule(kModule);
  ASSERT_TRUE(m.ok()) << m.status();
  ir::Function& fn = *(*m)->function("decode");
  ir::Op* norm = fn.Ops()[0];
  norm->attrs().Set("impl", "no_such_unit");
  EXPECT_FALSE(ReadSelection(*norm).ok());
  norm->attrs().Set("impl", "row_norm");
  norm->attrs().Set("kernels", std::vector<std::string>{"Norm.cu<NORM_BLOCK=64,NORM_COLS=64>::rms_norm"});
  norm->attrs().Set("grid", std::vector<int64_t>{1, 2});  // not parallel to kernels
  norm->attrs().Set("block", std::vector<int64_t>{64});
  norm->attrs().Set("smem", std::vector<int64_t>{0});
  EXPECT_FALSE(ReadSelection(*norm).ok());
  norm->attrs().Set("grid", std::vector<int64_t>{1});
  norm->attrs().Set("block", std::vector<int64_t>{4096});  // impossible block
  EXPECT_FALSE(ReadSelection(*norm).ok());
  norm->attrs().Set("block", std::vector<int64_t>{64});
  EXPECT_TRUE(ReadSelection(*norm).ok());
  // The matmuls carry no record although the function is read as selected: stale, refused.
  auto read = SelectionsOf(fn, 1, *TargetPreset("sm_90"), /*use_records=*/true);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("has no kernel selection record"), std::string::npos) << read.status();
}

TEST(Selection, TargetFieldsOnTheModule) {
  auto m = ir::ParseModule(kModule);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(ReadSelectionTarget(**m)->has_value());
  Target t = *TargetPreset("sm_90");
  t.sm_count = 114;
  EXPECT_TRUE(WriteSelectionTarget(t, **m));
  EXPECT_FALSE(WriteSelectionTarget(t, **m));  // unchanged
  auto back = ReadSelectionTarget(**m);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->sm_count, 114);
  EXPECT_EQ((*back)->arch, 90);
}

TEST(Selection, UnsupportedOpsSayWhy) {
  auto m = ir::ParseModule(R"(func @f(%x: f32[1, 8]) -> (f32[1, 2], i32[1, 2]) {
  %v, %i = top_k(%x) {k = 2} : f32[1, 2], i32[1, 2]
  return %v, %i
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  ir::Op* topk = (*m)->function("f")->Ops()[0];
  auto shapes = ShapesAt(*topk, 1);
  ASSERT_TRUE(shapes.ok());
  auto s = SelectGpuOp(*topk, *shapes, *TargetPreset("sm_90"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("sampling runs on the host"), std::string::npos) << s.status();
}

TEST(WeightLayout, OneEntryPerDtype) {
  EXPECT_EQ(MatrixLayoutFor(ir::DType::kF32).kind, WeightLayoutKind::kAsStored);
  EXPECT_EQ(MatrixLayoutFor(ir::DType::kF32).gemv_storage, 0);  // f32 stays on cuBLASLt
  EXPECT_EQ(MatrixLayoutFor(ir::DType::kF16).gemv_storage, 1);
  EXPECT_EQ(MatrixLayoutFor(ir::DType::kBF16).gemv_storage, 2);
  for (ir::DType q : {ir::DType::kQ8_0, ir::DType::kQ4_K, ir::DType::kQ6_K}) {
    EXPECT_EQ(MatrixLayoutFor(q).kind, WeightLayoutKind::kBf16Dequantized) << ir::DTypeName(q);
    EXPECT_EQ(MatrixLayoutFor(q).compute_dtype, ir::DType::kBF16);
  }
  EXPECT_EQ(LayoutBytes(MatrixLayoutFor(ir::DType::kBF16), 128, 64), 128 * 64 * 2);
  EXPECT_EQ(LayoutBytes(Q8Layout(), 128, 64), 128 * 64 + 128 * 2 * 4);
}

TEST(WeightLayout, RepackersMatchTheBlocks) {
  // Two rows of 32: q8_0 blocks quantized by the reference quantizer.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * static_cast<float>(i - 31);
  std::vector<uint8_t> q(2 * 34);
  ASSERT_TRUE(formats::Quantize(formats::GgmlType::kQ8_0, x, absl::MakeSpan(q)).ok());
  std::vector<float> want(64);
  ASSERT_TRUE(formats::Dequantize(formats::GgmlType::kQ8_0, q, absl::MakeSpan(want)).ok());
  // The bf16 layout: the dequantized values rounded to bf16 (round to nearest even).
  auto bf = Repack(MatrixLayoutFor(ir::DType::kQ8_0), ir::DType::kQ8_0, 2, 32, q, 1);
  ASSERT_TRUE(bf.ok()) << bf.status();
  ASSERT_EQ(bf->data.size(), 64u * 2);
  for (int i = 0; i < 64; ++i) {
    uint16_t h;
    std::memcpy(&h, bf->data.data() + 2 * i, 2);
    EXPECT_EQ(h, formats::FloatToBf16(want[i])) << i;
  }
  // The q8 layout: int8 values and one f32 scale per block.
  auto q8 = Repack(Q8Layout(), ir::DType::kQ8_0, 2, 32, q);
  ASSERT_TRUE(q8.ok()) << q8.status();
  ASSERT_EQ(q8->scales.size(), 2u * 4);
  for (int i = 0; i < 64; ++i) {
    float scale;
    std::memcpy(&scale, q8->scales.data() + 4 * (i / 32), 4);
    EXPECT_EQ(static_cast<float>(static_cast<int8_t>(q8->data[i])) * scale, want[i]) << i;
  }
  EXPECT_FALSE(Repack(Q8Layout(), ir::DType::kQ8_0, 2, 32, absl::MakeSpan(q).subspan(1)).ok());  // short
  EXPECT_TRUE(Repack(MatrixLayoutFor(ir::DType::kF32), ir::DType::kF32, 2, 32, {}).value().data.empty());
}

TEST(ParamBlock, HoldsTheStructBytes) {
  GemvParams p;
  p.w.w = 0x1000;
  p.w.scale = 0;
  p.x = 0x2000;
  p.y = 0x3000;
  p.n_rows = 77;
  ParamBlock b = ParamBlock::Of(p);
  EXPECT_EQ(b.size, 40u);
  unsigned long long x;
  std::memcpy(&x, b.bytes.data() + 16, 8);
  EXPECT_EQ(x, 0x2000u);
  int n;
  std::memcpy(&n, b.bytes.data() + 32, 4);
  EXPECT_EQ(n, 77);
}

}  // namespace
}  // namespace memra::kernels::cuda
