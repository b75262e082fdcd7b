// Lowering of qwen35 GGUFs: the module's shape (functions, state, attributes, weights by name),
// the printed IR round-trip, and clear errors for another architecture and malformed models
// (missing / inconsistent keys, missing tensors, wrong tensor shapes).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/qwen35/Qwen35Lowering.h"
#include "frontends/qwen35moe/Qwen35MoeLowering.h"
#include "gtest/gtest.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "runtime/cpu/CpuExecutor.h"
#include "tests/GgufEdit.h"
#include "tests/TestUtil.h"

namespace memra::frontends {
namespace {

using memra::testing::FileExists;
using memra::testing::SharedPath;
using memra::testing::TestDataPath;

const std::string kTiny = TestDataPath("models/qwen35-tiny-f32.gguf");

std::unique_ptr<gguf::GgufFile> OpenTiny() {
  auto f = gguf::GgufFile::Open(kTiny);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

using Edits = memra::testing::GgufEdits;
using memra::testing::DropKey;
using memra::testing::SetKey;
std::unique_ptr<gguf::GgufFile> Edited(const gguf::GgufFile& src, const Edits& e) {
  return memra::testing::EditedGguf(src, e);
}

TEST(Qwen35LoweringTest, LowersTheTinyModel) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto f = OpenTiny();
  auto m = LowerQwen35(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Module& mod = **m;
  EXPECT_TRUE(ir::VerifyModule(mod).ok());
  const ir::AttrDict& a = mod.attrs();
  EXPECT_EQ(a.GetString("arch"), "qwen35");
  EXPECT_EQ(a.I64Or("n_embd", 0), 256);
  EXPECT_EQ(a.I64Or("n_layer", 0), 4);
  EXPECT_EQ(a.I64Or("n_ff", 0), 512);
  EXPECT_EQ(a.I64Or("n_head", 0), 4);
  EXPECT_EQ(a.I64Or("n_head_kv", 0), 2);
  EXPECT_EQ(a.I64Or("head_dim", 0), 64);
  EXPECT_EQ(a.I64Or("n_rot", 0), 16);
  EXPECT_EQ(a.F64Or("rope_base", 0), 1e7);
  EXPECT_EQ(a.I64Or("ssm_d_conv", 0), 4);
  EXPECT_EQ(a.I64Or("ssm_d_state", 0), 32);
  EXPECT_EQ(a.I64Or("ssm_n_k_heads", 0), 2);
  EXPECT_EQ(a.I64Or("ssm_n_v_heads", 0), 4);
  EXPECT_EQ(a.I64Or("ssm_d_inner", 0), 128);
  EXPECT_EQ(a.I64Or("n_vocab", 0), 259);
  EXPECT_EQ(a.I64Or("n_ctx", 0), 4096);
  EXPECT_EQ(a.I64Or("n_ctx_train", 0), 4096);
  EXPECT_EQ(a.I64Or("tied_output", -1), 0);
  EXPECT_EQ(a.GetI64Array("recurrent_layers"), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(a.GetString("prefill_logits"), "last");
  // Every tensor of the file is a weight of the module, by name, with the file's type.
  EXPECT_EQ(mod.weights().size(), f->tensors().size());
  for (const gguf::TensorInfo& t : f->tensors()) EXPECT_NE(mod.weight(t.name), nullptr) << t.name;
  // State: pos, 3 linear layers x (conv, delta), 1 attention layer x (k, v).
  EXPECT_EQ(mod.states().size(), 9u);
  ASSERT_NE(mod.state("blk.3.k_cache"), nullptr);
  EXPECT_EQ(mod.state("blk.3.k_cache")->type().ToString(), "f32[4096, 2, 64]");
  EXPECT_EQ(mod.state("blk.0.conv_state")->type().ToString(), "f32[256, 3]");
  EXPECT_EQ(mod.state("blk.0.delta_state")->type().ToString(), "f32[4, 32, 32]");
  EXPECT_EQ(mod.state("pos")->type().ToString(), "i32[]");
  const ir::Function* prefill = mod.function("prefill");
  const ir::Function* decode = mod.function("decode");
  ASSERT_TRUE(prefill && decode);
  EXPECT_EQ(prefill->argument(0)->type().ToString(), "i32[T]");
  EXPECT_EQ(prefill->result_types()[0].ToString(), "f32[1, 259]");
  EXPECT_EQ(decode->argument(0)->type().ToString(), "i32[1]");
  EXPECT_EQ(decode->result_types()[0].ToString(), "f32[1, 259]");

  LowerOptions all;
  all.prefill_all_logits = true;
  all.n_ctx = 256;
  auto m2 = LowerQwen35(*f, all);
  ASSERT_TRUE(m2.ok()) << m2.status();
  EXPECT_EQ((*m2)->function("prefill")->result_types()[0].ToString(), "f32[T, 259]");
  EXPECT_EQ((*m2)->state("blk.3.v_cache")->type().ToString(), "f32[256, 2, 64]");
}

TEST(Qwen35LoweringTest, PrintedModuleRoundTrips) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto f = OpenTiny();
  auto m = LowerQwen35(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string text = ir::ToText(**m);
  EXPECT_TRUE(absl::StrContains(text, "l_out-3")) << text.substr(0, 2000);
  auto parsed = ir::ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(ir::VerifyModule(**parsed).ok());
  EXPECT_EQ(ir::ToText(**parsed), text);
}

TEST(Qwen35LoweringTest, TiedOutputHeadUsesTheEmbedding) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto src = OpenTiny();
  Edits e;
  e.tensor = [](const std::string& name, std::vector<int64_t>&, std::vector<uint8_t>&) {
    return name != "output.weight";
  };
  auto f = Edited(*src, e);
  ASSERT_NE(f, nullptr);
  auto m = LowerQwen35(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->attrs().I64Or("tied_output", -1), 1);
  EXPECT_EQ((*m)->weight("output.weight"), nullptr);
  // The head matmul of both functions reads token_embd.weight.
  for (const char* fn : {"prefill", "decode"}) {
    bool found = false;
    for (const ir::Op* op : (*m)->function(fn)->Ops())
      if (op->is(ir::OpKind::kMatMul) && op->result(0)->name() == "result_output")
        found = op->operand(1)->name() == "token_embd.weight";
    EXPECT_TRUE(found) << fn;
  }
  auto exec = runtime::CpuExecutor::Create(**m, *f);
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto out = (*exec)->Run("prefill", {runtime::HostTensor::FromI32({1, 87, 107}, {3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].ShapeString(), "f32[1, 259]");
}

// The registry (tests/frontends/ModelFamily_test.cc) words the unsupported-architecture errors;
// called directly, the qwen35 lowering refuses any other architecture.
TEST(Qwen35LoweringTest, RefusesOtherArchitectures) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  for (const char* arch : {"qwen35moe", "llama"}) {
    auto f = Edited(*OpenTiny(), SetKey("general.architecture", gguf::Value::String(arch)));
    auto m = LowerQwen35(*f);
    ASSERT_FALSE(m.ok()) << arch;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), absl::StrCat("architecture \"", arch, "\" is not qwen35")))
        << m.status();
  }
}

TEST(Qwen35LoweringTest, MissingRequiredKeysAreNamed) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto src = OpenTiny();
  for (const char* key :
       {"qwen35.context_length", "qwen35.embedding_length", "qwen35.block_count", "qwen35.feed_forward_length",
        "qwen35.attention.head_count", "qwen35.attention.layer_norm_rms_epsilon", "qwen35.rope.dimension_sections",
        "qwen35.ssm.conv_kernel", "qwen35.ssm.state_size", "qwen35.ssm.group_count", "qwen35.ssm.time_step_rank",
        "qwen35.ssm.inner_size", "general.architecture"}) {
    auto f = Edited(*src, DropKey(key));
    ASSERT_NE(f, nullptr);
    auto m = LowerQwen35(*f);
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound) << key << ": " << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), key)) << m.status();
  }
}

TEST(Qwen35LoweringTest, InconsistentKeysAreNamed) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto src = OpenTiny();
  struct Case {
    const char* key;
    gguf::Value value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"qwen35.ssm.inner_size", gguf::Value::U32(100), "qwen35.ssm.inner_size"},
      {"qwen35.attention.head_count_kv", gguf::Value::U32(3), "qwen35.attention.head_count_kv"},
      {"qwen35.attention.value_length", gguf::Value::U32(32), "qwen35.attention.value_length"},
      {"qwen35.rope.dimension_count", gguf::Value::U32(15), "qwen35.rope.dimension_count"},
      {"qwen35.rope.dimension_sections", gguf::Value::I32Array({3, 3, 2}), "qwen35.rope.dimension_sections"},
      {"qwen35.rope.dimension_sections", gguf::Value::I32Array({1, 1, 1, 5}), "4th IMROPE stream"},
      {"qwen35.ssm.time_step_rank", gguf::Value::U32(3), "qwen35.ssm"},
      {"qwen35.embedding_length", gguf::Value::String("256"), "qwen35.embedding_length"},
      {"qwen35.feed_forward_length", gguf::Value::I32Array({512, 512, 256, 512}), "per-layer values differ"},
  };
  for (const Case& c : cases) {
    auto f = Edited(*src, SetKey(c.key, c.value));
    ASSERT_NE(f, nullptr);
    auto m = LowerQwen35(*f);
    ASSERT_FALSE(m.ok()) << c.key;
    EXPECT_TRUE(absl::StrContains(m.status().message(), c.expect)) << c.key << ": " << m.status();
  }
  // A uniform per-layer array is accepted.
  auto f = Edited(*src, SetKey("qwen35.feed_forward_length", gguf::Value::I32Array({512, 512, 512, 512})));
  EXPECT_TRUE(LowerQwen35(*f).ok());
}

TEST(Qwen35LoweringTest, MissingOrMisshapenTensorsAreNamed) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto src = OpenTiny();
  {
    Edits e;
    e.tensor = [](const std::string& n, std::vector<int64_t>&, std::vector<uint8_t>&) {
      return n != "blk.3.attn_k.weight";
    };
    auto m = LowerQwen35(*Edited(*src, e));
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(absl::StrContains(m.status().message(), "blk.3.attn_k.weight")) << m.status();
  }
  {
    Edits e;
    e.tensor = [](const std::string& n, std::vector<int64_t>& ne, std::vector<uint8_t>& bytes) {
      if (n == "blk.1.ssm_norm.weight") {
        ne = {16};
        bytes.resize(16 * 4);
      }
      return true;
    };
    auto m = LowerQwen35(*Edited(*src, e));
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(m.status().message(), "blk.1.ssm_norm.weight")) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), "{16}")) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), "{32}")) << m.status();
  }
  {
    Edits e;  // transposed projection
    e.tensor = [](const std::string& n, std::vector<int64_t>& ne, std::vector<uint8_t>&) {
      if (n == "blk.0.ssm_out.weight") std::swap(ne[0], ne[1]);
      return true;
    };
    auto m = LowerQwen35(*Edited(*src, e));
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(absl::StrContains(m.status().message(), "blk.0.ssm_out.weight")) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), "expected {128, 256}")) << m.status();
  }
}

TEST(Qwen35LoweringTest, DefaultsApplyWhenOptionalKeysAreAbsent) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto src = OpenTiny();
  // full_attention_interval defaults to 4, rope.freq_base to 10000, nextn to 0.
  auto f = Edited(*src, DropKey("qwen35.full_attention_interval"));
  auto m = LowerQwen35(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->attrs().GetI64Array("recurrent_layers"), (std::vector<int64_t>{1, 1, 1, 0}));
  auto g = Edited(*src, DropKey("qwen35.rope.freq_base"));
  auto m2 = LowerQwen35(*g);
  ASSERT_TRUE(m2.ok()) << m2.status();
  EXPECT_EQ((*m2)->attrs().F64Or("rope_base", 0), 10000.0);
  // Explicit per-layer recurrent flags win over the interval.
  Edits e;
  e.add.push_back({"qwen35.attention.recurrent_layers",
                   gguf::Value::Array(gguf::ValueType::kBool, {gguf::Value::Bool(true), gguf::Value::Bool(true),
                                                               gguf::Value::Bool(true), gguf::Value::Bool(false)})});
  auto m3 = LowerQwen35(*Edited(*src, e));
  ASSERT_TRUE(m3.ok()) << m3.status();
  // head_count_kv absent -> n_head (4): the k projection {256, 128} then no longer fits.
  auto m4 = LowerQwen35(*Edited(*src, DropKey("qwen35.attention.head_count_kv")));
  ASSERT_FALSE(m4.ok());
  EXPECT_TRUE(absl::StrContains(m4.status().message(), "blk.3.attn_k.weight")) << m4.status();
}

// --- qwen35moe ---------------------------------------------------------------------------------

const std::string kMoe = TestDataPath("models/qwen35moe-tiny-q8_0.gguf");

std::unique_ptr<gguf::GgufFile> OpenMoe() {
  auto f = gguf::GgufFile::Open(kMoe);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

int CountOps(const ir::Module& m, absl::string_view fn, ir::OpKind kind) {
  int n = 0;
  for (const ir::Op* op : m.function(fn)->Ops()) n += op->is(kind);
  return n;
}

// The lowered module's status, expecting a failure with `code` whose message holds every `parts`.
void ExpectMoeError(const Edits& e, absl::StatusCode code, std::vector<std::string> parts) {
  auto src = OpenMoe();
  ASSERT_NE(src, nullptr);
  auto m = LowerQwen35Moe(*Edited(*src, e));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), code) << m.status();
  for (const std::string& p : parts) EXPECT_TRUE(absl::StrContains(m.status().message(), p)) << m.status();
}

Edits ReshapeTensor(const std::string& name, std::vector<int64_t> ne_new) {
  Edits e;
  e.tensor = [name, ne_new](const std::string& n, std::vector<int64_t>& ne, std::vector<uint8_t>& bytes) {
    if (n == name) {
      const int64_t before = ne[1] * (ne.size() > 2 ? ne[2] : 1),
                    after = ne_new[1] * (ne_new.size() > 2 ? ne_new[2] : 1);
      bytes.resize(bytes.size() / before * after);
      ne = ne_new;
    }
    return true;
  };
  return e;
}

TEST(Qwen35MoeLoweringTest, LowersTheTinyMoeModel) {
  if (!FileExists(kMoe)) GTEST_SKIP() << kMoe << " not found";
  auto f = OpenMoe();
  auto m = LowerQwen35Moe(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::AttrDict& a = (*m)->attrs();
  EXPECT_EQ(a.GetString("arch").value_or(""), "qwen35moe");
  EXPECT_EQ(a.I64Or("n_expert", 0), 8);
  EXPECT_EQ(a.I64Or("n_expert_used", 0), 2);
  EXPECT_EQ(a.I64Or("n_ff_exp", 0), 128);
  EXPECT_EQ(a.I64Or("n_ff_shexp", 0), 256);
  for (const char* fn : {"prefill", "decode"}) {
    EXPECT_EQ(CountOps(**m, fn, ir::OpKind::kMoeRoute), 4) << fn;
    EXPECT_EQ(CountOps(**m, fn, ir::OpKind::kMoeExperts), 4) << fn;
    EXPECT_EQ(CountOps(**m, fn, ir::OpKind::kGatedAdd), 4) << fn;
  }
  const ir::Weight* exps = (*m)->weight("blk.2.ffn_down_exps.weight");
  ASSERT_NE(exps, nullptr);
  EXPECT_EQ(exps->type().ToString(), "q8_0[8, 256, 128]");  // ggml ne {128, 256, 8} reversed
  EXPECT_EQ((*m)->weight("blk.0.ffn_gate_inp_shexp.weight")->type().ToString(), "f32[1, 256]");
  // Through the registry as well, and the text round-trips.
  auto via = LowerModel(*f);
  ASSERT_TRUE(via.ok()) << via.status();
  const std::string text = ir::ToText(**m);
  EXPECT_EQ(ir::ToText(**via), text);
  auto parsed = ir::ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(ir::VerifyModule(**parsed).ok());
  EXPECT_EQ(ir::ToText(**parsed), text);
}

TEST(Qwen35MoeLoweringTest, ExpertKeysThatDisagreeAreNamed) {
  if (!FileExists(kMoe)) GTEST_SKIP() << kMoe << " not found";
  ExpectMoeError(DropKey("qwen35moe.expert_count"), absl::StatusCode::kNotFound, {"qwen35moe.expert_count"});
  ExpectMoeError(DropKey("qwen35moe.expert_used_count"), absl::StatusCode::kNotFound, {"qwen35moe.expert_used_count"});
  ExpectMoeError(SetKey("qwen35moe.expert_used_count", gguf::Value::U32(9)), absl::StatusCode::kInvalidArgument,
                 {"qwen35moe.expert_used_count", "top-k = 9", "exceeds", "qwen35moe.expert_count (8)"});
  ExpectMoeError(SetKey("qwen35moe.expert_used_count", gguf::Value::U32(0)), absl::StatusCode::kInvalidArgument,
                 {"qwen35moe.expert_used_count = 0"});
  ExpectMoeError(SetKey("qwen35moe.expert_count", gguf::Value::U32(0)), absl::StatusCode::kInvalidArgument,
                 {"qwen35moe.expert_count = 0"});
  Edits groups;
  groups.add = {{"qwen35moe.expert_group_count", gguf::Value::U32(2)}};
  ExpectMoeError(groups, absl::StatusCode::kUnimplemented, {"qwen35moe.expert_group_count"});
  // The tensors hold 8 experts of 128: metadata saying otherwise names the tensor and the keys.
  ExpectMoeError(SetKey("qwen35moe.expert_count", gguf::Value::U32(4)), absl::StatusCode::kInvalidArgument,
                 {"blk.0.ffn_gate_inp.weight", "{256, 8}", "expected {256, 4}", "qwen35moe.expert_count = 4"});
  ExpectMoeError(SetKey("qwen35moe.expert_feed_forward_length", gguf::Value::U32(64)),
                 absl::StatusCode::kInvalidArgument,
                 {"blk.0.ffn_gate_exps.weight", "expected {256, 64, 8}", "qwen35moe.expert_feed_forward_length = 64"});
  ExpectMoeError(SetKey("qwen35moe.expert_shared_feed_forward_length", gguf::Value::U32(128)),
                 absl::StatusCode::kInvalidArgument,
                 {"blk.0.ffn_gate_shexp.weight", "qwen35moe.expert_shared_feed_forward_length = 128"});
}

TEST(Qwen35MoeLoweringTest, ExpertTensorsThatDisagreeAreNamed) {
  if (!FileExists(kMoe)) GTEST_SKIP() << kMoe << " not found";
  // 7 experts in one layer's down projections while the metadata and the other tensors say 8.
  ExpectMoeError(ReshapeTensor("blk.2.ffn_down_exps.weight", {128, 256, 7}), absl::StatusCode::kInvalidArgument,
                 {"blk.2.ffn_down_exps.weight", "{128, 256, 7}", "expected {128, 256, 8}", "qwen35moe.expert_count"});
  ExpectMoeError(ReshapeTensor("blk.1.ffn_up_exps.weight", {256, 64, 8}), absl::StatusCode::kInvalidArgument,
                 {"blk.1.ffn_up_exps.weight", "expected {256, 128, 8}"});
  for (const char* missing : {"blk.3.ffn_gate_inp_shexp.weight", "blk.0.ffn_gate_inp.weight",
                              "blk.1.ffn_down_exps.weight", "blk.2.ffn_up_shexp.weight"}) {
    Edits e;
    e.tensor = [missing](const std::string& n, std::vector<int64_t>&, std::vector<uint8_t>&) { return n != missing; };
    ExpectMoeError(e, absl::StatusCode::kNotFound, {missing});
  }
  Edits gate;
  gate.tensor = [](const std::string& n, std::vector<int64_t>&, std::vector<uint8_t>&) {
    return n != "blk.3.ffn_gate_inp_shexp.weight";
  };
  ExpectMoeError(gate, absl::StatusCode::kNotFound, {"blk.3.ffn_gate_inp_shexp.weight", "sigmoid gate"});
  // A dense FFN tensor in a MoE file.
  auto src = OpenMoe();
  gguf::GgufWriter w;
  for (const auto& [key, v] : src->metadata()) w.Set(key, v);
  for (const gguf::TensorInfo& t : src->tensors()) ASSERT_TRUE(w.AddTensorBytes(t.name, t.type, t.ne, t.data).ok());
  std::vector<uint8_t> zeros(256 * 512 * 4, 0);
  ASSERT_TRUE(w.AddTensorBytes("blk.0.ffn_gate.weight", formats::GgmlType::kF32, {256, 512}, zeros).ok());
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  auto f = gguf::GgufFile::FromBytes(*bytes, "dense-in-moe.gguf");
  ASSERT_TRUE(f.ok());
  auto m = LowerQwen35Moe(**f);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "blk.0.ffn_gate.weight")) << m.status();
}

// The fused ffn_gate_up_exps form (llama.cpp's create_tensor_gate_up_exps): per expert the gate
// rows then the up rows. Built from the separate tensors, it must give the same logits bit for bit.
TEST(Qwen35MoeLoweringTest, FusedGateUpExpertsEqualTheSeparateOnes) {
  if (!FileExists(kMoe)) GTEST_SKIP() << kMoe << " not found";
  auto src = OpenMoe();
  gguf::GgufWriter w;
  for (const auto& [key, v] : src->metadata()) w.Set(key, v);
  for (const gguf::TensorInfo& t : src->tensors()) {
    if (absl::EndsWith(t.name, "ffn_up_exps.weight")) continue;
    if (absl::EndsWith(t.name, "ffn_gate_exps.weight")) {
      const std::string layer = t.name.substr(0, t.name.size() - std::string("ffn_gate_exps.weight").size());
      const gguf::TensorInfo* up = src->FindTensor(layer + "ffn_up_exps.weight");
      ASSERT_NE(up, nullptr);
      const size_t per_expert = t.data.size() / t.ne[2];
      std::vector<uint8_t> fused;
      for (int64_t e = 0; e < t.ne[2]; ++e) {
        fused.insert(fused.end(), t.data.begin() + e * per_expert, t.data.begin() + (e + 1) * per_expert);
        fused.insert(fused.end(), up->data.begin() + e * per_expert, up->data.begin() + (e + 1) * per_expert);
      }
      ASSERT_TRUE(
          w.AddTensorBytes(layer + "ffn_gate_up_exps.weight", t.type, {t.ne[0], 2 * t.ne[1], t.ne[2]}, fused).ok());
      continue;
    }
    ASSERT_TRUE(w.AddTensorBytes(t.name, t.type, t.ne, t.data).ok());
  }
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  auto fused_file = gguf::GgufFile::FromBytes(*bytes, "fused.gguf");
  ASSERT_TRUE(fused_file.ok()) << fused_file.status();
  std::vector<float> logits[2];
  int idx = 0;
  for (const gguf::GgufFile* f : {src.get(), fused_file->get()}) {
    auto m = LowerQwen35Moe(*f);
    ASSERT_TRUE(m.ok()) << m.status();
    if (f != src.get()) {
      EXPECT_NE((*m)->weight("blk.0.ffn_gate_up_exps.weight"), nullptr);
      EXPECT_EQ((*m)->weight("blk.0.ffn_gate_exps.weight"), nullptr);
    }
    auto e = runtime::CpuExecutor::Create(**m, *f);
    ASSERT_TRUE(e.ok()) << e.status();
    std::vector<runtime::HostTensor> args;
    args.push_back(runtime::HostTensor::FromI32(memra::testing::kFixturePrompt,
                                                {static_cast<int64_t>(memra::testing::kFixturePrompt.size())}));
    auto out = (*e)->Run("prefill", std::move(args));
    ASSERT_TRUE(out.ok()) << out.status();
    logits[idx++].assign((*out)[0].f32(), (*out)[0].f32() + (*out)[0].numel());
  }
  ASSERT_FALSE(logits[0].empty());
  EXPECT_EQ(logits[0], logits[1]);
  // Both forms in one layer are refused.
  gguf::GgufWriter both;
  for (const auto& [key, v] : (*fused_file)->metadata()) both.Set(key, v);
  for (const gguf::TensorInfo& t : (*fused_file)->tensors())
    ASSERT_TRUE(both.AddTensorBytes(t.name, t.type, t.ne, t.data).ok());
  const gguf::TensorInfo* g = src->FindTensor("blk.1.ffn_gate_exps.weight");
  ASSERT_TRUE(both.AddTensorBytes(g->name, g->type, g->ne, g->data).ok());
  auto both_bytes = both.WriteToBytes();
  ASSERT_TRUE(both_bytes.ok());
  auto both_file = gguf::GgufFile::FromBytes(*both_bytes, "both.gguf");
  ASSERT_TRUE(both_file.ok());
  auto m = LowerQwen35Moe(**both_file);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "blk.1.ffn_gate_exps.weight")) << m.status();
  EXPECT_TRUE(absl::StrContains(m.status().message(), "fused or separate")) << m.status();
}

}  // namespace
}  // namespace memra::frontends
