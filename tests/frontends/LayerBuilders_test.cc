// The shared layer builders (frontends/common/) outside the qwen35 lowering: a plain (ungated,
// no q/k norm) attention layer with a SwiGLU FFN and a tied head, as the next families compose
// them, declared from a GGUF, verified, and run on the CPU executor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "frontends/common/AttentionBlock.h"
#include "frontends/common/Embedding.h"
#include "frontends/common/LayerContext.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/common/Norm.h"
#include "frontends/common/OutputHead.h"
#include "frontends/common/SwigluFfn.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"
#include "ir/Builder.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"
#include "runtime/cpu/CpuExecutor.h"
#include "tests/TestUtil.h"

namespace memra::frontends {
namespace {

constexpr int64_t E = 32, H = 2, Hkv = 1, D = 16, F = 64, V = 10, kCtx = 16;

std::unique_ptr<gguf::GgufFile> PlainModelFile(gguf::GgmlType norm_type = gguf::GgmlType::kF32) {
  gguf::GgufWriter w;
  w.Set("general.architecture", gguf::Value::String("plain"));
  uint64_t seed = 1;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, gguf::GgmlType type = gguf::GgmlType::kF32) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> v = memra::testing::RandomNormal(static_cast<size_t>(n), seed++, 0.2f);
    std::vector<uint8_t> bytes;
    if (type == gguf::GgmlType::kF32) {
      bytes.resize(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
    } else {
      bytes.assign(v.size() * 2, 0);  // f16 zeros: only the dtype matters to the check
    }
    EXPECT_TRUE(w.AddTensorBytes(name, type, ne, bytes).ok()) << name;
  };
  add("token_embd.weight", {E, V});
  add("output_norm.weight", {E});
  add("blk.0.attn_norm.weight", {E}, norm_type);
  add("blk.0.ffn_norm.weight", {E});
  add("blk.0.attn_q.weight", {E, D * H});
  add("blk.0.attn_k.weight", {E, D * Hkv});
  add("blk.0.attn_v.weight", {E, D * Hkv});
  add("blk.0.attn_output.weight", {D * H, E});
  add("blk.0.ffn_gate.weight", {E, F});
  add("blk.0.ffn_up.weight", {E, F});
  add("blk.0.ffn_down.weight", {F, E});
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto f = gguf::GgufFile::FromBytes(*bytes, "plain.gguf");
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

AttentionParams PlainAttention() {
  AttentionParams p;
  p.n_head = H;
  p.n_head_kv = Hkv;
  p.head_dim = D;
  p.n_rot = D;
  p.norm_eps = 1e-6;
  p.scale = 1.0 / std::sqrt(static_cast<double>(D));
  p.gate = AttentionParams::Gate::kNone;
  p.qk_norm = false;
  return p;
}

absl::StatusOr<std::unique_ptr<ir::Module>> BuildPlainModel(const gguf::GgufFile& f) {
  auto m = std::make_unique<ir::Module>();
  const AttentionParams attn = PlainAttention();
  MEMRA_RETURN_IF_ERROR(DeclareTokenEmbedding(f, *m, E, V));
  MEMRA_RETURN_IF_ERROR(DeclareOutputHead(f, *m, E, V, /*tied=*/true));
  MEMRA_RETURN_IF_ERROR(DeclareWeight(f, *m, LayerTensorName(0, "attn_norm.weight"), {E}));
  MEMRA_RETURN_IF_ERROR(DeclareWeight(f, *m, LayerTensorName(0, "ffn_norm.weight"), {E}));
  MEMRA_RETURN_IF_ERROR(DeclareAttentionWeights(f, *m, 0, E, attn));
  MEMRA_RETURN_IF_ERROR(DeclareSwigluFfn(f, *m, 0, E, F));
  ir::StateVar* counter = m->AddState(ir::StateKind::kPosition, "pos", ir::TensorType(ir::DType::kI32, ir::Shape{}));
  DeclareKvCache(*m, 0, kCtx, attn);
  for (const auto& [name, T] :
       {std::pair<const char*, ir::Dim>{"prefill", ir::Dim::Symbol("T")}, {"decode", ir::Dim(1)}}) {
    ir::Function* fn = m->AddFunction(name);
    ir::Value* tokens = fn->AddArgument("tokens", ir::TensorType(ir::DType::kI32, ir::Shape{T}));
    ir::OpBuilder b(fn);
    LayerContext c{b, *m, 0, T};
    ir::Value* x = BuildTokenEmbedding(b, *m, tokens);
    ir::Value* pos = b.Positions(counter, tokens);
    ir::Value* h = BuildLayerRmsNorm(c, x, "attn_norm.weight", 1e-6, "attn_norm");
    ir::Value* r = b.Add(BuildAttention(c, h, pos, attn), x);
    ir::Value* y = BuildLayerRmsNorm(c, r, "ffn_norm.weight", 1e-6, "ffn_norm");
    x = b.Add(BuildSwigluFfn(c, y), r);
    ir::Value* logits = BuildOutputHead(b, *m, x, {1e-6, /*tied=*/true, /*all_logits=*/false});
    b.AdvancePositions(counter, tokens);
    b.Return({logits});
    MEMRA_RETURN_IF_ERROR(b.status());
    fn->set_result_types({logits->type()});
  }
  MEMRA_RETURN_IF_ERROR(CheckValueWeightsAreF32(f, *m));
  MEMRA_RETURN_IF_ERROR(ir::VerifyModule(*m));
  return m;
}

TEST(LayerBuildersTest, PlainAttentionLayerBuildsVerifiesAndRuns) {
  auto f = PlainModelFile();
  ASSERT_NE(f, nullptr);
  auto m = BuildPlainModel(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  // Ungated, no q/k norm: no q_gate_split or sigmoid; rms_norm only for the two layer norms
  // and the output norm.
  int rms_norms = 0;
  for (const ir::Op& op : *(*m)->function("prefill")->body()) {
    EXPECT_FALSE(op.is(ir::OpKind::kQGateSplit));
    EXPECT_FALSE(op.is(ir::OpKind::kSigmoid));
    rms_norms += op.is(ir::OpKind::kRmsNorm);
  }
  EXPECT_EQ(rms_norms, 3);
  // The tied head reads token_embd.weight as a matrix twice (embedding and head).
  const ir::Weight* table = (*m)->weight("token_embd.weight");
  ASSERT_EQ(table->uses().size(), 4u);  // prefill and decode
  for (const ir::Use& u : table->uses()) EXPECT_TRUE(ir::IsMatrixOperand(*u.user, u.operand_index));

  auto exec = runtime::CpuExecutor::Create(**m, *f);
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto out = (*exec)->Run("prefill", {runtime::HostTensor::FromI32({1, 4, 7}, {3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].ShapeString(), "f32[1, 10]");
  auto next = (*exec)->Run("decode", {runtime::HostTensor::FromI32({2}, {1})});
  ASSERT_TRUE(next.ok()) << next.status();
  for (float v : (*next)[0].f32_span()) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ((*exec)->position(), 4);
}

TEST(LayerBuildersTest, ValueWeightsMustBeF32) {
  auto f = PlainModelFile(gguf::GgmlType::kF16);
  ASSERT_NE(f, nullptr);
  auto m = BuildPlainModel(*f);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(m.status().message(),
            "plain.gguf: tensor \"blk.0.attn_norm.weight\" has type f16; norm, bias and conv tensors must be f32");
}

TEST(LayerBuildersTest, NamesFollowTheGgufAndLlamaCppSchemes) {
  EXPECT_EQ(LayerTensorName(3, "attn_q.weight"), "blk.3.attn_q.weight");
  auto f = PlainModelFile();
  ASSERT_NE(f, nullptr);
  auto m = BuildPlainModel(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> names;
  for (const ir::Op& op : *(*m)->function("decode")->body())
    for (ir::Value* r : op.results())
      if (!r->name().empty()) names.push_back(r->name());
  for (const char* want : {"model.input_embed", "attn_norm-0", "Kcur-0", "Qcur-0", "kqv_out-0", "attn_output-0",
                           "ffn_norm-0", "ffn_out-0", "result_norm", "result_norm_last", "result_output"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

}  // namespace
}  // namespace memra::frontends
