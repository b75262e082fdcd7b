// The GPU op units' host side, without a GPU: the target description, module keys, the selection
// record on the IR (written, read back, refused when malformed or stale), the weight layouts'
// repackers, and one parameter block. The kernels themselves are checked on the H200 by
// tests/cuda/OpTable_test.
#include <gtest/gtest.h>

#include <cstring>

#include "absl/strings/str_cat.h"

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
  // The kernels need sm_90: other presets plan, but compile and run refuse them by name.
  EXPECT_TRUE(CheckKernelsSupport(*TargetPreset("sm_90")).ok());
  for (const char* other : {"sm_80", "sm_89"}) {
    const absl::Status st = CheckKernelsSupport(*TargetPreset(other));
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << other;
    EXPECT_NE(st.message().find(std::string(other) + " is not supported yet"), std::string::npos) << st;
  }
  // The roofline ceilings travel with the target (a plan's header) and read back.
  EXPECT_EQ(back->mem_gbps, 4600);
  EXPECT_EQ(back->bf16_tflops, 790);
  // A line written before the ceilings existed still parses (they are then unknown).
  auto old = Target::Parse("arch=sm_90 sm_count=132 name=old plan");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->mem_gbps, 0);
  int64_t gbps = 0, tflops = 0;
  EXPECT_TRUE(MeasuredCeilings("NVIDIA H200", &gbps, &tflops));
  EXPECT_EQ(gbps, 4600);
  EXPECT_FALSE(MeasuredCeilings("NVIDIA A10", &gbps, &tflops));
  EXPECT_EQ(Bf16FlopsPerClockPerSm(90), 4096);
  EXPECT_EQ(Bf16FlopsPerClockPerSm(70), 0);
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
    auto shapes = ShapesAt(*op, 1, WeightMode::kBf16);
    ASSERT_TRUE(shapes.ok()) << shapes.status();
    auto s = SelectGpuOp(*op, *shapes, t);
    ASSERT_TRUE(s.ok()) << s.status();
    WriteSelection(*s, *op);
    fresh.push_back(*s);
  }
  // One token through bf16 and q8_0 (--weights bf16: its bf16 copy) weights: the GEMV; the norm: a
  // row kernel.
  EXPECT_EQ(fresh[0].impl, "row_norm");
  EXPECT_EQ(fresh[1].impl, "gemv");
  EXPECT_EQ(fresh[2].impl, "gemv");
  EXPECT_EQ(fresh[2].launches[0].kernel.module.Key(),
            "Gemv.cu<GEMV_K=64,GEMV_R=4,GEMV_W=2,GEMV_WARPS=1>");  // 64 rows, 4 a warp: 16 blocks
  EXPECT_FALSE(fn.Ops().back()->attrs().Has("impl"));              // return: an alias, not recorded
  auto read = SelectionsOf(fn, 1, t, WeightMode::kBf16, /*use_records=*/true);
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

// A selection's ticket words (last-block tickets the executor keeps zeroed) are recorded, read
// back, and erased by a re-selection without them; an impossible count is refused.
TEST(Selection, TicketWordsAreRecorded) {
  auto m = ir::ParseModule(kModule);
  ASSERT_TRUE(m.ok()) << m.status();
  ir::Op& norm = *(*m)->function("decode")->Ops()[0];
  auto shapes = ShapesAt(norm, 1, WeightMode::kBf16);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  auto s = SelectGpuOp(norm, *shapes, *TargetPreset("sm_90"));
  ASSERT_TRUE(s.ok()) << s.status();
  OpSelection with = *s;
  with.ticket_words = 6;
  EXPECT_TRUE(WriteSelection(with, norm));
  EXPECT_EQ(norm.attrs().I64Or("ticket_words", 0), 6);
  auto back = ReadSelection(norm);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ((*back)->ticket_words, 6);
  EXPECT_TRUE(WriteSelection(*s, norm));  // without: the attribute goes
  EXPECT_FALSE(norm.attrs().Has("ticket_words"));
  for (int64_t bad : {int64_t{-1}, int64_t{1} << 40}) {
    norm.attrs().Set("ticket_words", bad);
    auto r = ReadSelection(norm);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("ticket_words"), std::string::npos) << r.status();
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
  // Thread-block clusters: one size per launch, dividing its grid.
  norm->attrs().Set("cluster", std::vector<int64_t>{3});
  EXPECT_FALSE(ReadSelection(*norm).ok());  // 3 does not divide the grid of 1
  norm->attrs().Set("cluster", std::vector<int64_t>{1, 1});
  EXPECT_FALSE(ReadSelection(*norm).ok());  // not parallel to kernels
  norm->attrs().Set("grid", std::vector<int64_t>{8});
  norm->attrs().Set("cluster", std::vector<int64_t>{4});
  auto clustered = ReadSelection(*norm);
  ASSERT_TRUE(clustered.ok() && clustered->has_value()) << clustered.status();
  EXPECT_EQ((*clustered)->launches[0].cluster, 4u);
  // Written back, the record keeps the size; a selection without clusters writes none.
  EXPECT_FALSE(WriteSelection(**clustered, *norm));  // unchanged
  OpSelection plain = **clustered;
  plain.launches[0].cluster = 1;
  auto m2 = ir::ParseModule(kModule);
  ASSERT_TRUE(m2.ok()) << m2.status();
  ir::Op* other = (*m2)->function("decode")->Ops()[0];
  EXPECT_TRUE(WriteSelection(plain, *other));
  EXPECT_FALSE(other->attrs().Has("cluster"));
  norm->attrs().Erase("cluster");
  norm->attrs().Set("grid", std::vector<int64_t>{1});
  // The matmuls carry no record although the function is read as selected: stale, refused.
  auto read = SelectionsOf(fn, 1, *TargetPreset("sm_90"), WeightMode::kBlocks, /*use_records=*/true);
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

// Sliding-window attention on CUDA: every attention unit reads the window. Precision bf16: prefill
// on the tensor-core kernel; decode on split-KV for head dims that are multiples of 64, else the
// per-(token, head) kernel. Precision f32 (or a head dim the tensor cores refuse): the CUDA-core
// prefill kernels.
TEST(Selection, SlidingWindowOnCuda) {
  auto parse = [](int64_t d, const char* precision = "bf16") {
    return ir::ParseModule(absl::StrCat("state kv @kc : f32[32, 1, ", d, "]\nstate kv @vc : f32[32, 1, ", d,
                                        "]\nfunc @f(%q: f32[T, 2, ", d, "], %pos: i32[T]) -> (f32[T, 2, ", d,
                                        "]) {\n  %o = attention(%q, @kc, @vc, %pos) {precision = \"", precision,
                                        "\", scale = 1.0, window = 16} : f32[T, 2, ", d, "]\n  return %o\n}\n"));
  };
  struct Case {
    int64_t d;
    const char* precision;
    int64_t bucket;
    const char* impl;
  };
  for (const Case& c : {Case{16, "f32", 64, "attention_group"}, Case{16, "bf16", 1, "attention"},
                        Case{64, "bf16", 1, "attention_split"}, Case{16, "bf16", 4, "flash_attention"},
                        Case{16, "bf16", 64, "flash_attention"}, Case{8, "bf16", 64, "attention_group"}}) {
    auto m = parse(c.d, c.precision);
    ASSERT_TRUE(m.ok()) << m.status();
    ir::Op* op = (*m)->function("f")->Ops()[0];
    auto at = ShapesAt(*op, c.bucket, WeightMode::kBlocks);
    ASSERT_TRUE(at.ok()) << at.status();
    auto s = SelectGpuOp(*op, *at, *TargetPreset("sm_90"));
    ASSERT_TRUE(s.ok()) << c.d << " " << c.precision << " " << c.bucket << ": " << s.status();
    EXPECT_EQ(s->impl, c.impl) << c.d << " " << c.precision << " " << c.bucket;
  }
}

TEST(Selection, UnsupportedOpsSayWhy) {
  auto m = ir::ParseModule(R"(func @f(%x: f32[1, 8]) -> (f32[1, 2], i32[1, 2]) {
  %v, %i = top_k(%x) {k = 2} : f32[1, 2], i32[1, 2]
  return %v, %i
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  ir::Op* topk = (*m)->function("f")->Ops()[0];
  auto shapes = ShapesAt(*topk, 1, WeightMode::kBlocks);
  ASSERT_TRUE(shapes.ok());
  auto s = SelectGpuOp(*topk, *shapes, *TargetPreset("sm_90"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("top-n logprobs run on the host"), std::string::npos) << s.status();

  // The device sampler keeps a bitmap of the penalized ids in shared memory: a vocabulary past
  // what a block holds is refused with the numbers; the 9B's 248,320 fits.
  for (int64_t vocab : {int64_t{248320}, int64_t{600000}}) {
    auto sm = ir::ParseModule(absl::StrCat("func @f(%x: f32[4, ", vocab,
                                           "], %p: f32[4, 8], %q: i32[4, 128]) -> (i32[4]) {\n"
                                           "  %id = sample(%x, %p, %q) : i32[4]\n  return %id\n}\n"));
    ASSERT_TRUE(sm.ok()) << sm.status();
    ir::Op* sample = (*sm)->function("f")->Ops()[0];
    auto ss = ShapesAt(*sample, 1, WeightMode::kBlocks);
    ASSERT_TRUE(ss.ok());
    auto sel = SelectGpuOp(*sample, *ss, *TargetPreset("sm_90"));
    if (vocab == 248320) {
      EXPECT_TRUE(sel.ok()) << sel.status();
    } else {
      ASSERT_FALSE(sel.ok());
      EXPECT_NE(sel.status().message().find("shared memory"), std::string::npos) << sel.status();
    }
  }
}

// The MoE ops: a module holding them passes the executor's unit check; the decode bucket takes the
// routing kernel and the GEMVs straight from the expert blocks (gemv_q_moe*), a prefill bucket the
// grouped tensor-core products (moe_sort + moe_gemm).
TEST(Selection, MoeOpsSelectDecodeGemvsAndGroupedPrefill) {
  auto m = ir::ParseModule(R"(weight @down : q8_0[8, 64, 32]
weight @gate : q8_0[8, 32, 64]
weight @up : q8_0[8, 32, 64]
func @decode(%x: f32[1, 64], %l: f32[1, 8]) -> (f32[1, 64]) attributes {bucket = 1} {
  %w, %ids = moe_route(%l) {k = 2} : f32[1, 2], i32[1, 2]
  %y = moe_experts(%x, %w, %ids, @down, @gate, @up) : f32[1, 64]
  return %y
}
func @prefill(%x: f32[T, 64], %l: f32[T, 8]) -> (f32[T, 64]) attributes {bucket = 16} {
  %w, %ids = moe_route(%l) {k = 2} : f32[T, 2], i32[T, 2]
  %y = moe_experts(%x, %w, %ids, @down, @gate, @up) : f32[T, 64]
  return %y
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(CheckGpuUnitsImplement(**m).ok());
  auto target = TargetPreset("sm_90");
  ASSERT_TRUE(target.ok());
  auto entries = [](const std::vector<OpSelection>& sel) {
    std::vector<std::string> out;
    for (const OpSelection& s : sel)
      for (const Launch& l : s.launches) out.push_back(l.kernel.entry);
    return out;
  };
  auto dec = SelectionsOf(*(*m)->function("decode"), 1, *target, WeightMode::kBlocks, /*use_records=*/false);
  ASSERT_TRUE(dec.ok()) << dec.status();
  ASSERT_GE(dec->size(), 2u);  // + the return's alias
  EXPECT_EQ((*dec)[0].impl, "moe_route");
  EXPECT_EQ((*dec)[1].impl, "moe_experts_gemv_q");
  EXPECT_EQ(entries(*dec), (std::vector<std::string>{"moe_route", "gemv_q_quantize_x", "gemv_q_moe_swiglu",
                                                     "gemv_q_quantize_x", "gemv_q_moe_down"}));
  auto pre = SelectionsOf(*(*m)->function("prefill"), 16, *target, WeightMode::kBlocks, /*use_records=*/false);
  ASSERT_TRUE(pre.ok()) << pre.status();
  ASSERT_GE(pre->size(), 2u);
  EXPECT_EQ((*pre)[1].impl, "moe_experts_grouped");
  EXPECT_EQ(entries(*pre), (std::vector<std::string>{"moe_route", "moe_sort", "moe_gemm", "moe_gemm", "moe_combine"}));
  EXPECT_GT((*pre)[1].scratch_bytes, 0);
}

TEST(WeightLayout, OneEntryPerDtypeAndMode) {
  for (WeightMode mode : {WeightMode::kBlocks, WeightMode::kBf16}) {
    const WeightLayout* f32 = FindMatrixLayout(ir::DType::kF32, mode);
    ASSERT_NE(f32, nullptr);
    EXPECT_EQ(f32->kind, WeightLayoutKind::kAsStored);
    EXPECT_EQ(f32->gemv_storage, 4);  // Gemv.cu GEMV_W=4 at M = 1 (the MoE router)
    // f16 stays f16 (cuBLASLt with f16 operands; no bf16 rounding) in both modes.
    EXPECT_EQ(FindMatrixLayout(ir::DType::kF16, mode)->compute_dtype, ir::DType::kF16);
    EXPECT_EQ(FindMatrixLayout(ir::DType::kF16, mode)->gemv_storage, 1);
    EXPECT_EQ(FindMatrixLayout(ir::DType::kBF16, mode)->gemv_storage, 2);
  }
  // Every format Dequant.cu reads: blocks by default, the bf16 copy with --weights bf16.
  const std::vector<ir::DType> want = {ir::DType::kQ4_0, ir::DType::kQ4_1, ir::DType::kQ5_0,   ir::DType::kQ5_1,
                                       ir::DType::kQ8_0, ir::DType::kQ2_K, ir::DType::kQ3_K,   ir::DType::kQ4_K,
                                       ir::DType::kQ5_K, ir::DType::kQ6_K, ir::DType::kIQ4_NL, ir::DType::kIQ4_XS,
                                       ir::DType::kMXFP4};
  EXPECT_EQ(GpuBlockFormats(), want);
  for (ir::DType q : want) {
    const WeightLayout* b = FindMatrixLayout(q, WeightMode::kBlocks);
    ASSERT_NE(b, nullptr) << ir::DTypeName(q);
    EXPECT_EQ(b->kind, WeightLayoutKind::kBlocks);
    EXPECT_EQ(b->name, absl::StrCat(ir::DTypeName(q), " (blocks)"));
    EXPECT_EQ(b->compute_dtype, ir::DType::kBF16);  // dequantized to bf16 for cuBLASLt
    EXPECT_EQ(b->gemv_storage, 0);                  // not a Gemv.cu storage
    const WeightLayout* d = FindMatrixLayout(q, WeightMode::kBf16);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->kind, WeightLayoutKind::kBf16Dequantized);
    EXPECT_EQ(d->compute_dtype, ir::DType::kBF16);
    // Device bytes: blocks are the GGUF's tensor bytes; the copy 2 per weight.
    EXPECT_EQ(LayoutBytes(*b, q, 128, 512), *ir::StorageBytes(q, 128 * 512)) << ir::DTypeName(q);
    EXPECT_EQ(LayoutBytes(*d, q, 128, 512), 128 * 512 * 2);
    EXPECT_EQ(DequantWorkspaceBytes(*b, 128, 512), 128 * 512 * 2);
    EXPECT_EQ(DequantWorkspaceBytes(*d, 128, 512), 0);
  }
  EXPECT_EQ(LayoutBytes(*FindMatrixLayout(ir::DType::kQ4_K, WeightMode::kBlocks), ir::DType::kQ4_K, 2, 512), 2 * 288);
  EXPECT_EQ(LayoutBytes(*FindMatrixLayout(ir::DType::kBF16, WeightMode::kBlocks), ir::DType::kBF16, 128, 64),
            128 * 64 * 2);
  EXPECT_EQ(LayoutBytes(Q8Layout(), ir::DType::kQ8_0, 128, 64), 128 * 64 + 128 * 2 * 4);
  DeviceMatrix m;
  m.stored = ir::DType::kQ6_K;
  m.cols = 4096;
  EXPECT_EQ(m.row_bytes(), 16 * 210);
}

TEST(WeightLayout, TypesWithoutALayoutAreNamedWithTheWayOut) {
  // nvfp4 has a host dequantizer but no GPU one: blocks refuse it, naming --weights bf16.
  EXPECT_EQ(FindMatrixLayout(ir::DType::kNVFP4, WeightMode::kBlocks), nullptr);
  auto st = MatrixLayoutFor(ir::DType::kNVFP4, WeightMode::kBlocks, "tensor \"blk.0.ffn_up.weight\"");
  ASSERT_FALSE(st.ok());
  const std::string msg(st.status().message());
  EXPECT_NE(msg.find("tensor \"blk.0.ffn_up.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("type nvfp4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--weights bf16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("q4_K"), std::string::npos) << msg;  // lists what the GPU reads
  auto bf = MatrixLayoutFor(ir::DType::kNVFP4, WeightMode::kBf16, "tensor \"w\"");
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ((*bf)->kind, WeightLayoutKind::kBf16Dequantized);
  // Nothing dequantizes iq2_xxs: both modes refuse it, without pointing at --weights bf16 as a fix.
  for (WeightMode mode : {WeightMode::kBlocks, WeightMode::kBf16}) {
    auto iq = MatrixLayoutFor(ir::DType::kIQ2_XXS, mode, "tensor \"w\"");
    ASSERT_FALSE(iq.ok());
    EXPECT_NE(iq.status().message().find("cannot dequantize it yet"), std::string::npos) << iq.status();
  }
  EXPECT_FALSE(MatrixLayoutFor(ir::DType::kI32, WeightMode::kBlocks, "tensor \"w\"").ok());
  EXPECT_EQ(ParseWeightMode("blocks").value(), WeightMode::kBlocks);
  EXPECT_EQ(ParseWeightMode("bf16").value(), WeightMode::kBf16);
  EXPECT_FALSE(ParseWeightMode("q8").ok());
  EXPECT_EQ(WeightModeName(WeightMode::kBf16), "bf16");
}

// Products on blocks: the activation cast, one Dequant.cu launch per weight in blocks (into the
// workspace, sized for the largest), then cuBLASLt; at T = 1 too (no GEMV reads blocks yet).
constexpr char kBlocksModule[] = R"(weight @norm : f32[512]
weight @tab : q4_K[1000, 512]
weight @a : q4_K[256, 512]
weight @b : q8_0[64, 512]
weight @g : q6_K[128, 512]
weight @u : q6_K[128, 512]
weight @h : bf16[64, 512]
func @prefill_t16(%ids: i32[16]) -> (f32[16, 256], f32[16, 64], f32[16, 128], f32[16, 64]) attributes {bucket = 16} {
  %x = embed(%ids, @tab) : f32[16, 512]
  %n = rms_norm(%x, @norm) {eps = 1e-06} : f32[16, 512]
  %p, %q = matmul_group(%n, @a, @b) : f32[16, 256], f32[16, 64]
  %s = matmul_swiglu(%n, @g, @u) : f32[16, 128]
  %y = matmul(%n, @h) : f32[16, 64]
  return %p, %q, %s, %y
}
func @decode(%ids: i32[1]) -> (f32[1, 256]) attributes {bucket = 1} {
  %x = embed(%ids, @tab) : f32[1, 512]
  %y = matmul(%x, @a) : f32[1, 256]
  return %y
}
)";

TEST(Selection, BlocksDequantizeIntoTheWorkspace) {
  auto m = ir::ParseModule(kBlocksModule);
  ASSERT_TRUE(m.ok()) << m.status();
  const Target t = *TargetPreset("sm_90");
  ir::Function& fn = *(*m)->function("prefill_t16");
  std::vector<OpSelection> sel;
  for (ir::Op* op : fn.Ops()) {
    auto shapes = ShapesAt(*op, 16, WeightMode::kBlocks);
    ASSERT_TRUE(shapes.ok()) << shapes.status();
    auto s = SelectGpuOp(*op, *shapes, t);
    ASSERT_TRUE(s.ok()) << s.status();
    WriteSelection(*s, *op);
    sel.push_back(*s);
  }
  // embed on a table in blocks: its rows dequantized to f32.
  EXPECT_EQ(sel[0].impl, "embed_blocks");
  ASSERT_EQ(sel[0].launches.size(), 1u);
  EXPECT_EQ(sel[0].launches[0].kernel.ToString(), "Dequant.cu<DEQ_TYPE=12>::dequant_rows_f32");
  EXPECT_EQ(sel[0].workspace_bytes, 0);
  // matmul_group of q4_K and q8_0: one cast, one dequantization each; the workspace holds the larger.
  EXPECT_EQ(sel[2].impl, "gemm");
  ASSERT_EQ(sel[2].launches.size(), 3u);
  EXPECT_EQ(sel[2].launches[0].kernel.entry, "cast_f32_bf16");
  EXPECT_EQ(sel[2].launches[1].kernel.ToString(), "Dequant.cu<DEQ_TYPE=12>::dequant_bf16");
  EXPECT_EQ(sel[2].launches[2].kernel.ToString(), "Dequant.cu<DEQ_TYPE=8>::dequant_bf16");
  EXPECT_EQ(sel[2].workspace_bytes, 256 * 512 * 2);
  EXPECT_EQ(sel[2].scratch_bytes, 16 * 512 * 2);  // the bf16 activation copy, in the arena
  // matmul_swiglu on q6_K: cast, two dequantizations, the gating.
  EXPECT_EQ(sel[3].impl, "gemm_swiglu");
  ASSERT_EQ(sel[3].launches.size(), 4u);
  EXPECT_EQ(sel[3].launches[1].kernel.module.Key(), "Dequant.cu<DEQ_TYPE=14>");
  EXPECT_EQ(sel[3].launches[3].kernel.entry, "swiglu_f32");
  EXPECT_EQ(sel[3].workspace_bytes, 128 * 512 * 2);
  // A bf16 weight needs no workspace.
  EXPECT_EQ(sel[4].workspace_bytes, 0);
  // The record carries workspace_bytes, and reads back.
  EXPECT_EQ(fn.Ops()[2]->attrs().I64Or("workspace_bytes", 0), 256 * 512 * 2);
  auto back = ReadSelection(*fn.Ops()[2]);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ((*back)->workspace_bytes, 256 * 512 * 2);
  fn.Ops()[2]->attrs().Set("workspace_bytes", int64_t{-1});
  EXPECT_FALSE(ReadSelection(*fn.Ops()[2]).ok());
  fn.Ops()[2]->attrs().Set("workspace_bytes", int64_t{256 * 512 * 2});
  // Decode (T = 1) on blocks: the per-format GEMV reads the blocks (GemvQuant.cc), no workspace.
  ir::Op* dm = (*m)->function("decode")->Ops()[1];
  auto ds = SelectGpuOp(*dm, *ShapesAt(*dm, 1, WeightMode::kBlocks), t);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->impl, "gemv_q");
  EXPECT_EQ(ds->workspace_bytes, 0);
  // With --weights bf16 the same op is the bf16 GEMV, and nothing needs a workspace.
  auto dbf = SelectGpuOp(*dm, *ShapesAt(*dm, 1, WeightMode::kBf16), t);
  ASSERT_TRUE(dbf.ok());
  EXPECT_EQ(dbf->impl, "gemv");
  EXPECT_EQ(dbf->workspace_bytes, 0);
  // The executor's workspace: the largest request over every function.
  EXPECT_EQ(WorkspaceBytesOf(**m, t, WeightMode::kBlocks, /*use_records=*/false).value(), 256 * 512 * 2);
  EXPECT_EQ(WorkspaceBytesOf(**m, t, WeightMode::kBf16, /*use_records=*/false).value(), 0);
}

TEST(Selection, AMatrixWithoutALayoutIsRefusedNamingIt) {
  auto m = ir::ParseModule(R"(weight @w : nvfp4[64, 128]
func @decode(%x: f32[1, 128]) -> (f32[1, 64]) attributes {bucket = 1} {
  %y = matmul(%x, @w) : f32[1, 64]
  return %y
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  ir::Op* op = (*m)->function("decode")->Ops()[0];
  auto s = ShapesAt(*op, 1, WeightMode::kBlocks);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("weight @w: type nvfp4"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("--weights bf16"), std::string::npos) << s.status();
  auto b = ShapesAt(*op, 1, WeightMode::kBf16);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->layout(1)->kind, WeightLayoutKind::kBf16Dequantized);
}

TEST(Selection, WeightModeOnTheModule) {
  auto m = ir::ParseModule(kModule);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(ReadSelectionWeights(**m)->has_value());  // never selected
  (*m)->attrs().Set("kernel_arch", "sm_90");
  EXPECT_EQ(ReadSelectionWeights(**m)->value(), WeightMode::kBf16);  // selected before the attribute existed
  EXPECT_TRUE(WriteSelectionWeights(WeightMode::kBlocks, **m));
  EXPECT_FALSE(WriteSelectionWeights(WeightMode::kBlocks, **m));
  EXPECT_EQ(ReadSelectionWeights(**m)->value(), WeightMode::kBlocks);
  (*m)->attrs().Set("kernel_weights", "q8");
  EXPECT_FALSE(ReadSelectionWeights(**m).ok());
}

// select-kernels' module-wide options read back (ReadSelectOptions): defaults when absent, each
// written value, and a delta-step split the kernel cannot take named.
TEST(Selection, SelectOptionsOnTheModule) {
  auto m = ir::ParseModule(kModule);
  ASSERT_TRUE(m.ok()) << m.status();
  auto none = ReadSelectOptions(**m);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->decode_class, DecodeClass::kBucket);
  EXPECT_FALSE(none->last_block_merge);
  EXPECT_EQ(none->delta_step_split, 1);
  EXPECT_FALSE(WriteDeltaStepSplit(1, **m));  // the default is not written
  EXPECT_TRUE(WriteDeltaStepSplit(4, **m));
  EXPECT_FALSE(WriteDeltaStepSplit(4, **m));
  EXPECT_TRUE(WriteLastBlockMerge(true, **m));
  auto set = ReadSelectOptions(**m);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->delta_step_split, 4);
  EXPECT_TRUE(set->last_block_merge);
  EXPECT_TRUE(WriteDeltaStepSplit(1, **m));  // erased
  EXPECT_EQ(ReadSelectOptions(**m)->delta_step_split, 1);
  (*m)->attrs().Set("kernel_delta_step_split", int64_t{3});
  auto bad = ReadSelectOptions(**m);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kernel_delta_step_split: delta-step-split is 1, 2, 4 or 8, not 3"),
            std::string::npos)
      << bad.status();
}

// select-kernels{gemv-warp-bytes} and {gemv-splitk-max-k} on the module (WriteSelectOptions
// writes every option at once, the defaults as no attribute); a value past 65,536 named.
TEST(Selection, GemvWarpBytes) {
  auto m = ir::ParseModule(kModule);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ReadSelectOptions(**m)->gemv_warp_bytes, 16384);
  SelectOptions o;
  o.gemv_warp_bytes = 8192;
  o.delta_step_split = 2;
  EXPECT_TRUE(WriteSelectOptions(o, **m));
  EXPECT_FALSE(WriteSelectOptions(o, **m));
  auto back = ReadSelectOptions(**m);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->gemv_warp_bytes, 8192);
  EXPECT_EQ(back->delta_step_split, 2);
  o.gemv_splitk_max_k = 4096;
  o.combine_early_loads = false;  // the default is true: false is written as 0
  o.gemv_q_pair_dot = false;      // likewise
  EXPECT_TRUE(WriteSelectOptions(o, **m));
  EXPECT_EQ(ReadSelectOptions(**m)->gemv_splitk_max_k, 4096);
  EXPECT_EQ((*m)->attrs().GetI64("kernel_combine_early_loads"), std::optional<int64_t>(0));
  EXPECT_FALSE(ReadSelectOptions(**m)->combine_early_loads);
  EXPECT_EQ((*m)->attrs().GetI64("kernel_gemv_q_pair_dot"), std::optional<int64_t>(0));
  EXPECT_FALSE(ReadSelectOptions(**m)->gemv_q_pair_dot);
  EXPECT_TRUE(WriteSelectOptions(SelectOptions{}, **m));  // every default erased
  EXPECT_EQ(ReadSelectOptions(**m)->gemv_splitk_max_k, 12288);
  EXPECT_FALSE((*m)->attrs().Has("kernel_gemv_splitk_max_k"));
  EXPECT_FALSE((*m)->attrs().Has("kernel_combine_early_loads"));
  EXPECT_TRUE(ReadSelectOptions(**m)->combine_early_loads);
  EXPECT_FALSE((*m)->attrs().Has("kernel_gemv_q_pair_dot"));
  EXPECT_TRUE(ReadSelectOptions(**m)->gemv_q_pair_dot);
  EXPECT_FALSE((*m)->attrs().Has("kernel_gemv_warp_bytes"));
  EXPECT_FALSE((*m)->attrs().Has("kernel_delta_step_split"));
  (*m)->attrs().Set("kernel_gemv_warp_bytes", int64_t{70000});
  auto bad = ReadSelectOptions(**m);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kernel_gemv_warp_bytes: gemv-warp-bytes is 0..65536, not 70000"),
            std::string::npos)
      << bad.status();
}

// The ranged integer options whose default is 0 (select-kernels{l2-prefetch-bytes},
// {gemv-q-blocks-per-sm}) on the module: 0 is no attribute; a value is written and read back; one
// past the maximum, or negative, is refused naming the attribute and the range.
TEST(Selection, RangedIntegerOptions) {
  struct Row {
    const char* attr;
    int SelectOptions::*field;
    int value;
    int64_t max;
    const char* range;  // the refusal's text before the value
  };
  for (const Row& r : {Row{"kernel_l2_prefetch_bytes", &SelectOptions::l2_prefetch_bytes, 8 << 20, kMaxL2PrefetchBytes,
                           "l2-prefetch-bytes is 0..1073741824, not "},
                       Row{"kernel_gemv_q_blocks_per_sm", &SelectOptions::gemv_q_blocks_per_sm, 6, kMaxGemvQBlocksPerSm,
                           "gemv-q-blocks-per-sm is 0..8, not "}}) {
    SCOPED_TRACE(r.attr);
    auto m = ir::ParseModule(kModule);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ((*ReadSelectOptions(**m)).*r.field, 0);
    SelectOptions o;
    o.*r.field = r.value;
    EXPECT_TRUE(WriteSelectOptions(o, **m));
    EXPECT_FALSE(WriteSelectOptions(o, **m));
    EXPECT_EQ((*m)->attrs().GetI64(r.attr), std::optional<int64_t>(r.value));
    EXPECT_EQ((*ReadSelectOptions(**m)).*r.field, r.value);
    EXPECT_TRUE(WriteSelectOptions(SelectOptions{}, **m));
    EXPECT_FALSE((*m)->attrs().Has(r.attr));
    (*m)->attrs().Set(r.attr, r.max);
    EXPECT_TRUE(ReadSelectOptions(**m).ok());
    for (int64_t bad_value : {r.max + 1, int64_t{-1}}) {
      (*m)->attrs().Set(r.attr, bad_value);
      auto bad = ReadSelectOptions(**m);
      ASSERT_FALSE(bad.ok()) << bad_value;
      EXPECT_NE(bad.status().message().find(absl::StrCat(r.attr, ": ", r.range, bad_value)), std::string::npos)
          << bad.status();
    }
  }
}

// The boolean options whose default is false (select-kernels{gemv-evict-first},
// {step-early-loads}, {gemv-q-x-early}) on the module: false is no attribute, true is written as 1 and read back.
TEST(Selection, BooleanOptions) {
  for (const auto& [attr, field] : {std::pair{"kernel_gemv_evict_first", &SelectOptions::gemv_evict_first},
                                    std::pair{"kernel_step_early_loads", &SelectOptions::step_early_loads},
                                    std::pair{"kernel_gemv_q_x_early", &SelectOptions::gemv_q_x_early}}) {
    SCOPED_TRACE(attr);
    auto m = ir::ParseModule(kModule);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_FALSE((*ReadSelectOptions(**m)).*field);
    SelectOptions o;
    o.*field = true;
    EXPECT_TRUE(WriteSelectOptions(o, **m));
    EXPECT_FALSE(WriteSelectOptions(o, **m));
    EXPECT_EQ((*m)->attrs().GetI64(attr), std::optional<int64_t>(1));
    EXPECT_TRUE((*ReadSelectOptions(**m)).*field);
    EXPECT_TRUE(WriteSelectOptions(SelectOptions{}, **m));
    EXPECT_FALSE((*m)->attrs().Has(attr));
  }
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
  auto bf = Repack(*FindMatrixLayout(ir::DType::kQ8_0, WeightMode::kBf16), ir::DType::kQ8_0, 2, 32, q, 1);
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
  EXPECT_TRUE(
      Repack(*FindMatrixLayout(ir::DType::kF32, WeightMode::kBlocks), ir::DType::kF32, 2, 32, {}).value().data.empty());
  // Blocks go up as they are: no host copy.
  EXPECT_TRUE(Repack(*FindMatrixLayout(ir::DType::kQ8_0, WeightMode::kBlocks), ir::DType::kQ8_0, 2, 32, q)
                  .value()
                  .data.empty());
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
