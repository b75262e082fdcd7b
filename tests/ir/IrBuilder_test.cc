// Builds Qwen3.5-tiny-shaped functions with OpBuilder (type inference), verifies them, checks
// the textual round trip, sticky builder errors, symbol substitution and cloning.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace memra::ir {
namespace {

constexpr int64_t kEmbd = 256, kVocab = 259, kFf = 512;
constexpr double kEps = 1e-6;

Dim T() { return Dim::Symbol("T"); }

// The module of qwen35-tiny: layer 0 Gated DeltaNet, layer 1 full attention (ggml ne shapes).
std::unique_ptr<Module> MakeModule() {
  auto m = std::make_unique<Module>();
  m->attrs().Set("arch", "qwen35");
  m->AddWeightNe("token_embd.weight", DType::kQ8_0, {kEmbd, kVocab});
  for (int il = 0; il < 2; ++il) {
    std::string p = "blk." + std::to_string(il) + ".";
    m->AddWeightNe(p + "attn_norm.weight", DType::kF32, {kEmbd});
    m->AddWeightNe(p + "post_attention_norm.weight", DType::kF32, {kEmbd});
    m->AddWeightNe(p + "ffn_gate.weight", DType::kQ4_K, {kEmbd, kFf});
    m->AddWeightNe(p + "ffn_up.weight", DType::kQ4_K, {kEmbd, kFf});
    m->AddWeightNe(p + "ffn_down.weight", DType::kQ6_K, {kFf, kEmbd});
  }
  m->AddWeightNe("blk.0.attn_qkv.weight", DType::kQ8_0, {kEmbd, 256});
  m->AddWeightNe("blk.0.attn_gate.weight", DType::kQ8_0, {kEmbd, 128});
  m->AddWeightNe("blk.0.ssm_conv1d.weight", DType::kF32, {4, 256});
  m->AddWeightNe("blk.0.ssm_dt.bias", DType::kF32, {4});
  m->AddWeightNe("blk.0.ssm_a", DType::kF32, {4});
  m->AddWeightNe("blk.0.ssm_beta.weight", DType::kF32, {kEmbd, 4});
  m->AddWeightNe("blk.0.ssm_alpha.weight", DType::kF32, {kEmbd, 4});
  m->AddWeightNe("blk.0.ssm_norm.weight", DType::kF32, {32});
  m->AddWeightNe("blk.0.ssm_out.weight", DType::kQ8_0, {128, kEmbd});
  m->AddWeightNe("blk.1.attn_q.weight", DType::kBF16, {kEmbd, 512});
  m->AddWeightNe("blk.1.attn_k.weight", DType::kBF16, {kEmbd, 128});
  m->AddWeightNe("blk.1.attn_v.weight", DType::kBF16, {kEmbd, 128});
  m->AddWeightNe("blk.1.attn_output.weight", DType::kBF16, {256, kEmbd});
  m->AddWeightNe("blk.1.attn_q_norm.weight", DType::kF32, {64});
  m->AddWeightNe("blk.1.attn_k_norm.weight", DType::kF32, {64});
  m->AddWeightNe("output_norm.weight", DType::kF32, {kEmbd});
  m->AddWeightNe("output.weight", DType::kQ6_K, {kEmbd, kVocab});
  m->AddState(StateKind::kPosition, "pos", {DType::kI32, {}});
  m->AddState(StateKind::kConv, "blk.0.conv", {DType::kF32, {256, 3}}, {{"layer", 0}});
  m->AddState(StateKind::kDelta, "blk.0.delta", {DType::kF32, {4, 32, 32}}, {{"layer", 0}});
  m->AddState(StateKind::kKv, "blk.1.k_cache", {DType::kF16, {4096, 2, 64}}, {{"layer", 1}});
  m->AddState(StateKind::kKv, "blk.1.v_cache", {DType::kF16, {4096, 2, 64}}, {{"layer", 1}});
  return m;
}

Value* DeltaNetLayer(OpBuilder& b, Module& m, Value* x) {
  auto T = [&] { return x->shape()[0]; };  // the tokens dim (T in @prefill, 1 in @decode)
  auto w = [&](const char* n) { return m.weight(std::string("blk.0.") + n); };
  Value* qkv = b.MatMul(x, w("attn_qkv.weight"));
  Value* z = b.MatMul(x, w("attn_gate.weight"));
  Value* beta_in = b.MatMul(x, w("ssm_beta.weight"));
  Value* alpha = b.MatMul(x, w("ssm_alpha.weight"));
  auto [beta, g] = b.DeltaNetGates(beta_in, alpha, w("ssm_dt.bias"), w("ssm_a"));
  Value* c = b.Silu(b.Conv1dCausal(qkv, w("ssm_conv1d.weight"), m.state("blk.0.conv")));
  auto qkv_parts = b.Split(c, 1, {64, 64, 128});
  Value* q = b.L2Norm(b.Reshape(qkv_parts[0], {T(), 2, 32}), kEps);
  Value* k = b.L2Norm(b.Reshape(qkv_parts[1], {T(), 2, 32}), kEps);
  Value* v = b.Reshape(qkv_parts[2], {T(), 4, 32});
  Value* o = b.GatedDeltaScan(q, k, v, g, beta, m.state("blk.0.delta"), 1.0 / std::sqrt(32.0));
  Value* on = b.GatedRmsNorm(o, b.Reshape(z, {T(), 4, 32}), w("ssm_norm.weight"), kEps);
  return b.MatMul(b.Reshape(on, {T(), 128}), w("ssm_out.weight"));
}

Value* AttentionLayer(OpBuilder& b, Module& m, Value* x, Value* pos) {
  auto T = [&] { return x->shape()[0]; };
  auto w = [&](const char* n) { return m.weight(std::string("blk.1.") + n); };
  auto [q, gate] = b.QGateSplit(b.MatMul(x, w("attn_q.weight")), 4, 64);
  Value* k = b.Reshape(b.MatMul(x, w("attn_k.weight")), {T(), 2, 64});
  Value* v = b.Reshape(b.MatMul(x, w("attn_v.weight")), {T(), 2, 64});
  q = b.Rope(b.RmsNorm(q, w("attn_q_norm.weight"), kEps), pos, 16, 1e7);
  k = b.Rope(b.RmsNorm(k, w("attn_k_norm.weight"), kEps), pos, 16, 1e7);
  b.KvAppend(k, v, m.state("blk.1.k_cache"), m.state("blk.1.v_cache"), pos);
  Value* att = b.Attention(q, m.state("blk.1.k_cache"), m.state("blk.1.v_cache"), pos, 0.125);
  Value* gated = b.Mul(att, b.Sigmoid(gate));
  return b.MatMul(b.Reshape(gated, {T(), 256}), w("attn_output.weight"));
}

Function* BuildForward(Module& m, absl::string_view name, Dim tokens) {
  Function* f = m.AddFunction(name);
  Value* tok = f->AddArgument("tok", {DType::kI32, {tokens}});
  OpBuilder b(f);
  Value* pos = b.Positions(m.state("pos"), tok)->Named("pos");
  Value* x = b.Embed(tok, m.weight("token_embd.weight"))->Named("x");
  for (int il = 0; il < 2; ++il) {
    std::string p = "blk." + std::to_string(il) + ".";
    Value* h = b.RmsNorm(x, m.weight(p + "attn_norm.weight"), kEps);
    Value* a = il == 0 ? DeltaNetLayer(b, m, h) : AttentionLayer(b, m, h, pos);
    Value* r = b.Add(a, x)->Named("attn_residual" + std::to_string(il));
    Value* y = b.RmsNorm(r, m.weight(p + "post_attention_norm.weight"), kEps);
    Value* ff =
        b.MatMul(b.Swiglu(b.MatMul(y, m.weight(p + "ffn_gate.weight")), b.MatMul(y, m.weight(p + "ffn_up.weight"))),
                 m.weight(p + "ffn_down.weight"));
    x = b.Add(ff, r)->Named("l_out" + std::to_string(il));
  }
  Value* out = b.RmsNorm(b.TakeLastRow(x), m.weight("output_norm.weight"), kEps);
  Value* logits = b.MatMul(out, m.weight("output.weight"))->Named("logits");
  b.AdvancePositions(m.state("pos"), tok);
  b.Return({logits});
  f->set_result_types({logits->type()});
  return b.ok() ? f : nullptr;
}

TEST(IrBuilder, BuildsAVerifiedQwen35Forward) {
  auto m = MakeModule();
  Function* f = BuildForward(*m, "prefill", T());
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(VerifyModule(*m).ok()) << VerifyModule(*m);
  EXPECT_EQ(f->result_types()[0].ToString(), "f32[1, 259]");
  // Spot checks of inferred types.
  Value* x = nullptr;
  for (Op* op : f->Ops())
    if (op->num_results() && op->result(0)->name() == "attn_residual1") x = op->result(0);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->type().ToString(), "f32[T, 256]");
  EXPECT_GT(f->NumOps(), 50u);
}

TEST(IrBuilder, TextRoundTripIsIdentical) {
  auto m = MakeModule();
  ASSERT_NE(BuildForward(*m, "prefill", T()), nullptr);
  ASSERT_NE(BuildForward(*m, "decode", Dim(1)), nullptr);
  std::string text = ToText(*m);
  auto parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_TRUE(VerifyModule(**parsed).ok());
  EXPECT_EQ(ToText(**parsed), text);
  // Unnamed values print numbered, named ones by name.
  EXPECT_NE(text.find("%attn_residual0 = add("), std::string::npos);
  EXPECT_NE(text.find("weight @token_embd.weight : q8_0[259, 256]"), std::string::npos);
}

TEST(IrBuilder, ErrorsAreStickyAndNameTheRule) {
  auto m = MakeModule();
  Function* f = m->AddFunction("bad");
  Value* x = f->AddArgument("x", {DType::kF32, {T(), 128}});
  OpBuilder b(f);
  Value* y = b.RmsNorm(x, m->weight("blk.0.attn_norm.weight"), kEps);  // weight is [256]
  Value* z = b.Silu(y);                                                // skipped: built from a poison value
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "building 'rms_norm': operand 'w' (@blk.0.attn_norm.weight : f32[256]) must have shape "
            "[128] (the last dim of 'x')");
  EXPECT_NE(z, nullptr);
  EXPECT_EQ(f->NumOps(), 0u);
  // A state where an activation belongs.
  OpBuilder b2(f);
  b2.Silu(m->state("pos"));
  EXPECT_EQ(b2.status().message(), "building 'silu': operand 'x' must be an activation, got state @pos : i32[]");
}

TEST(IrBuilder, GenericCreateInfersTypes) {
  auto m = MakeModule();
  Function* f = m->AddFunction("g");
  Value* x = f->AddArgument("x", {DType::kF32, {T(), 512}});
  OpBuilder b(f);
  auto op = b.Create(OpKind::kQGateSplit, {x}, {{"n_head", 4}, {"head_dim", 64}});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->num_results(), 2u);
  EXPECT_EQ((*op)->result(1)->type().ToString(), "f32[T, 4, 64]");
  auto bad = b.Create(OpKind::kQGateSplit, {x}, {{"n_head", 4}, {"head_dim", 32}});
  EXPECT_FALSE(bad.ok());
  auto parts = b.Split(x, -1, {100, 412});
  EXPECT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1]->type().ToString(), "f32[T, 412]");
  auto [vals, idx] = b.TopK(x, 3);
  EXPECT_EQ(idx->type().ToString(), "i32[T, 3]");
  Value* cat = b.Concat({x, x}, 0);
  EXPECT_EQ(cat->type().ToString(), "f32[2*T, 512]");
  // rms_norm's weight is optional (Gemma 4's V norm); a sliding window is an attention attribute.
  Value* unweighted = b.RmsNorm(x, nullptr, 1e-6);
  EXPECT_EQ(unweighted->type().ToString(), "f32[T, 512]");
  EXPECT_EQ(unweighted->def()->num_operands(), 1u);
  Value* gelu = b.Gelu(x);
  EXPECT_EQ(b.Tanh(gelu)->type().ToString(), "f32[T, 512]");
  EXPECT_TRUE(b.ok()) << b.status();
}

TEST(IrBuilder, SubstituteSymbolsAndClone) {
  auto m = MakeModule();
  Function* f = BuildForward(*m, "prefill", T());
  ASSERT_NE(f, nullptr);
  Function* f16 = f->CloneInto(m.get(), "prefill_16");
  f16->SubstituteSymbols({{"T", 16}});
  EXPECT_TRUE(VerifyModule(*m).ok()) << VerifyModule(*m);
  EXPECT_EQ(f16->argument(0)->type().ToString(), "i32[16]");
  EXPECT_EQ(f->argument(0)->type().ToString(), "i32[T]");
  EXPECT_EQ(f16->NumOps(), f->NumOps());
  auto copy = m->Clone();
  EXPECT_EQ(ToText(*copy), ToText(*m));
}

TEST(IrShapes, DimsAndElementCounts) {
  Dim d = Dim::Symbol("T", 2, 1);
  EXPECT_EQ(d.ToString(), "2*T+1");
  EXPECT_EQ(Dim::Symbol("T").Plus(-3).ToString(), "T-3");
  EXPECT_EQ(d.Evaluate({{"T", 5}}), 11);
  EXPECT_FALSE(d.Evaluate({}).has_value());
  EXPECT_TRUE(Shape::SameNumElements(Shape{T(), 4096}, Shape{T(), 32, 128}));
  EXPECT_FALSE(Shape::SameNumElements(Shape{T(), 4096}, Shape{T(), 32, 64}));
  EXPECT_TRUE(Shape::SameNumElements(Shape{T(), Dim::Symbol("P")}, Shape{Dim::Symbol("P"), T()}));
  EXPECT_FALSE(Shape::SameNumElements(Shape{T(), 2}, Shape{Dim::Symbol("T", 2)}.WithDim(0, Dim::Symbol("T", 1, 1))));
  EXPECT_EQ(Shape({T(), 8}).Substitute({{"T", 3}}).NumElements(), 24);
}

TEST(IrAttributes, FloatsRoundTrip) {
  for (double v : {1e-6, 1e-5, 0.1, 1.0 / 3, 1e7, 10000.0, -0.5, 6.103515625e-05, 1e300, 5e-324}) {
    std::string s = FormatDouble(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
    EXPECT_NE(s.find_first_of(".e"), std::string::npos) << s;
  }
  EXPECT_EQ(FormatDouble(1e7), "10000000.0");
  EXPECT_EQ(FormatDouble(1e-6), "1e-06");
}

TEST(IrOps, TableIsConsistent) {
  for (int i = 0; i < NumOpKinds(); ++i) {
    const OpInfo& info = InfoOf(static_cast<OpKind>(i));
    EXPECT_EQ(LookupOpKind(info.mnemonic), info.kind) << info.mnemonic;
    for (const AttrSpec& a : info.attrs) EXPECT_FALSE(a.name.empty()) << info.mnemonic;
    for (size_t k = 0; k + 1 < info.operands.size(); ++k)
      EXPECT_FALSE(info.operands[k].variadic) << info.mnemonic << ": only the last operand is variadic";
  }
  EXPECT_EQ(InfoOf(OpKind::kRmsNorm).attrs[0].kind, AttrKind::kF64);
  EXPECT_EQ(InfoOf(OpKind::kAttention).operands[1].role, OperandRole::kState);
}

// The `matrix` role: GEMM weights and embedding tables, and nothing read as values.
TEST(IrOps, MatrixOperands) {
  EXPECT_EQ(InfoOf(OpKind::kMatMul).operands[1].role, OperandRole::kMatrix);
  EXPECT_EQ(InfoOf(OpKind::kRmsNorm).operands[1].role, OperandRole::kWeight);
  EXPECT_TRUE(IsWeightRole(OperandRole::kMatrix));
  EXPECT_TRUE(IsWeightRole(OperandRole::kWeight));
  EXPECT_FALSE(IsWeightRole(OperandRole::kState));
  EXPECT_FALSE(IsMatrixOperand(OpKind::kMatMul, 0));
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMatMul, 1));
  EXPECT_FALSE(IsMatrixOperand(OpKind::kMatMul, 2));  // no such operand
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMatMulGroup, 1));
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMatMulGroup, 4));  // the variadic tail
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMatMulSwiglu, 1));
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMatMulSwiglu, 2));
  EXPECT_FALSE(IsMatrixOperand(OpKind::kEmbed, 0));
  EXPECT_TRUE(IsMatrixOperand(OpKind::kEmbed, 1));
  std::vector<std::string> matrix_ops;
  for (int i = 0; i < NumOpKinds(); ++i) {
    const OpInfo& info = InfoOf(static_cast<OpKind>(i));
    for (const OperandSpec& o : info.operands)
      if (o.role == OperandRole::kMatrix) matrix_ops.push_back(absl::StrCat(info.mnemonic, ".", o.name));
  }
  EXPECT_EQ(matrix_ops, (std::vector<std::string>{"embed.table",
                                                  "matmul.w",
                                                  "matmul_group.w",
                                                  "moe_router.w",
                                                  "moe_experts.w_down",
                                                  "moe_experts.w_gate_up",
                                                  "matmul_add_rms_norm.w",
                                                  "matmul_swiglu.w_gate",
                                                  "matmul_swiglu.w_up",
                                                  "add_rms_norm_matmul.w",
                                                  "matmul_delta_net_step.w_qkv",
                                                  "matmul_delta_net_step.w_z",
                                                  "matmul_delta_net_step.w_b",
                                                  "matmul_delta_net_step.w_a",
                                                  "moe_ffn.sh_gate_inp",
                                                  "moe_ffn.sh_gate",
                                                  "moe_ffn.sh_up",
                                                  "moe_ffn.sh_down",
                                                  "moe_ffn.w_down",
                                                  "moe_ffn.w_gate_up",
                                                  "moe_ffn_ungated.sh_gate",
                                                  "moe_ffn_ungated.sh_up",
                                                  "moe_ffn_ungated.sh_down",
                                                  "moe_ffn_ungated.w_down",
                                                  "moe_ffn_ungated.w_gate_up"}));
  EXPECT_FALSE(IsMatrixOperand(OpKind::kMoeExperts, 2));  // ids
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMoeExperts, 5));   // w_up, the variadic tail
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMoeFfn, 9));
  EXPECT_FALSE(IsMatrixOperand(OpKind::kMoeFfnUngated, 2));     // ids
  EXPECT_TRUE(IsMatrixOperand(OpKind::kMoeFfnUngated, 8));      // w_up, the variadic tail
  EXPECT_FALSE(IsMatrixOperand(OpKind::kAddRmsNormMatMul, 2));  // the norm weight
  EXPECT_TRUE(IsMatrixOperand(OpKind::kAddRmsNormMatMul, 3));
  EXPECT_TRUE(IsMatrixOperand(OpKind::kAddRmsNormMatMul, 6));  // the variadic tail
}

}  // namespace
}  // namespace memra::ir
