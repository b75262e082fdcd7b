// The step35 hyperparameters as llama.cpp's loader reads them: the fixture's values (shared
// fixtures README §10.1), and the bad input, each an error naming the key (and the layer)
// before anything is lowered: per-layer arrays of the wrong length, heads that do not divide, a
// window of 0, rotary dims past the head, a routed-expert clamp on a layer without experts, a MoE
// layer without its routed or shared experts, an unknown gating function, RoPE scaling (memra runs
// it unscaled: a factor is refused, not ignored), a missing or mistyped window pattern.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/step35/Step35Hparams.h"
#include "gtest/gtest.h"
#include "tests/GgufEdit.h"
#include "tests/TestUtil.h"

namespace memra::frontends {
namespace {

using memra::testing::DropKey;
using memra::testing::EditedGguf;
using memra::testing::FileExists;
using memra::testing::GgufEdits;
using memra::testing::SetKey;
using memra::testing::SharedPath;

const std::string kTiny = SharedPath("fixtures/models/step35-tiny-f32.gguf");

std::unique_ptr<gguf::GgufFile> OpenTiny() {
  auto f = gguf::GgufFile::Open(kTiny);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

gguf::Value I32Array(std::vector<int32_t> v) {
  std::vector<gguf::Value> e;
  for (int32_t x : v) e.push_back(gguf::Value::I32(x));
  return gguf::Value::Array(gguf::ValueType::kI32, e);
}
gguf::Value F32Array(std::vector<float> v) {
  std::vector<gguf::Value> e;
  for (float x : v) e.push_back(gguf::Value::F32(x));
  return gguf::Value::Array(gguf::ValueType::kF32, e);
}

GgufEdits AddKey(const std::string& key, gguf::Value v) {
  GgufEdits e;
  e.add.push_back({key, std::move(v)});
  return e;
}

TEST(Step35HparamsTest, FixtureValues) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto f = OpenTiny();
  auto h = ReadStep35Hparams(*f);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->n_embd, 128);
  EXPECT_EQ(h->n_layer, 5);
  EXPECT_EQ(h->n_layer_nextn, 0);
  EXPECT_EQ(h->head_dim, 32);
  EXPECT_EQ(h->n_head, (std::vector<int64_t>{4, 8, 8, 8, 4}));
  EXPECT_EQ(h->n_head_kv, (std::vector<int64_t>{2, 2, 2, 2, 2}));
  EXPECT_EQ(h->swa, (std::vector<bool>{false, true, true, true, false}));
  EXPECT_EQ(h->n_swa, 16);
  // Full layers rotate half of rope.dimension_count (16 of 32) at base 5e6; sliding ones 32 at 1e4.
  EXPECT_EQ(h->Rot(0), 16);
  EXPECT_EQ(h->Rot(1), 32);
  EXPECT_DOUBLE_EQ(h->RopeBase(0), 5e6);
  EXPECT_DOUBLE_EQ(h->RopeBase(2), 1e4);
  EXPECT_FLOAT_EQ(static_cast<float>(h->rms_eps), 1e-5f);
  EXPECT_EQ(h->moe_layer, (std::vector<bool>{false, true, true, true, true}));
  EXPECT_EQ(h->gated_layer, (std::vector<bool>{true, true, true, true, true}));
  EXPECT_EQ(h->n_ff[0], 256);
  EXPECT_EQ(h->n_expert, 8);
  EXPECT_EQ(h->n_expert_used, 3);
  EXPECT_EQ(h->n_ff_exp, 64);
  EXPECT_EQ(h->n_ff_shexp, 128);
  EXPECT_EQ(h->gating, 2);  // absent: Step's sigmoid
  EXPECT_DOUBLE_EQ(h->expert_weights_scale, 2.0);
  EXPECT_TRUE(h->expert_weights_norm);
  EXPECT_EQ(h->clamp_exp, (std::vector<double>{0, 1.5, 1.5, 1.5, 1.5}));
  EXPECT_EQ(h->clamp_shexp, (std::vector<double>{0, 2, 2, 2, 2}));
  EXPECT_EQ(h->n_vocab, 259);
  EXPECT_FALSE(h->tied_output);
  auto attrs = Step35Attributes(*h);
  EXPECT_EQ(attrs.GetString("expert_gating").value_or(""), "sigmoid");
  EXPECT_EQ(attrs.GetI64Array("moe_layers").value_or(std::vector<int64_t>{}), (std::vector<int64_t>{0, 1, 1, 1, 1}));
}

struct BadCase {
  std::string what;
  GgufEdits edits;
  absl::StatusCode code;
  std::string message;
};

TEST(Step35HparamsTest, BadInputIsNamed) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  const std::vector<BadCase> cases = {
      {"head counts shorter than the layers", SetKey("step35.attention.head_count", I32Array({4, 8})),
       absl::StatusCode::kInvalidArgument, "step35.attention.head_count\" has 2 entries, expected 5"},
      {"kv heads that do not divide", SetKey("step35.attention.head_count_kv", I32Array({2, 3, 2, 2, 2})),
       absl::StatusCode::kInvalidArgument, "layer 1: step35.attention.head_count (8) must be a multiple of"},
      {"clamps shorter than the layers", SetKey("step35.swiglu_clamp_exp", F32Array({0, 1.5f})),
       absl::StatusCode::kInvalidArgument, "step35.swiglu_clamp_exp has 2 entries, expected one per layer (5)"},
      {"a negative clamp", SetKey("step35.swiglu_clamp_shexp", F32Array({0, 2, -1, 2, 2})),
       absl::StatusCode::kInvalidArgument, "step35.swiglu_clamp_shexp[2] = -1 must be finite and >= 0"},
      {"a clamp on the dense layer", SetKey("step35.swiglu_clamp_exp", F32Array({1, 1.5f, 1.5f, 1.5f, 1.5f})),
       absl::StatusCode::kInvalidArgument, "step35.swiglu_clamp_exp[0] = 1 clamps routed experts, but layer 0"},
      {"pattern shorter than the layers",
       SetKey("step35.attention.sliding_window_pattern",
              gguf::Value::Array(gguf::ValueType::kBool, {gguf::Value::Bool(true)})),
       absl::StatusCode::kInvalidArgument, "step35.attention.sliding_window_pattern has 1 entries, expected 5"},
      {"window of 0", SetKey("step35.attention.sliding_window", gguf::Value::U32(0)),
       absl::StatusCode::kInvalidArgument, "step35.attention.sliding_window must be > 0"},
      {"no window", DropKey("step35.attention.sliding_window"), absl::StatusCode::kNotFound,
       "step35.attention.sliding_window"},
      {"rotary dims not a multiple of 4", SetKey("step35.rope.dimension_count", gguf::Value::U32(30)),
       absl::StatusCode::kInvalidArgument, "step35.rope.dimension_count (30) must be a multiple of 4"},
      {"rotary dims past the head", AddKey("step35.rope.dimension_count_swa", gguf::Value::U32(48)),
       absl::StatusCode::kInvalidArgument, "step35.rope.dimension_count_swa (48) must be even"},
      {"key and value lengths differ", SetKey("step35.attention.value_length", gguf::Value::U32(16)),
       absl::StatusCode::kInvalidArgument, "step35.attention.key_length (32) and step35.attention.value_length (16)"},
      {"more experts used than exist", SetKey("step35.expert_used_count", gguf::Value::U32(9)),
       absl::StatusCode::kInvalidArgument, "step35.expert_used_count (9) must be in [1, step35.expert_count (8)]"},
      {"no expert width", DropKey("step35.expert_feed_forward_length"), absl::StatusCode::kNotFound,
       "step35.expert_feed_forward_length"},
      {"an unknown gating function", AddKey("step35.expert_gating_func", gguf::Value::U32(7)),
       absl::StatusCode::kUnimplemented, "step35.expert_gating_func\" = 7"},
      {"all layers MTP", AddKey("step35.nextn_predict_layers", gguf::Value::U32(5)), absl::StatusCode::kInvalidArgument,
       "step35.nextn_predict_layers (5) must be in [0, step35.block_count (5))"},
      {"fewer layers counted than the file holds", SetKey("step35.block_count", gguf::Value::U32(4)),
       absl::StatusCode::kInvalidArgument, "tensor blk.4."},
      {"a trunk layer counted as MTP", AddKey("step35.nextn_predict_layers", gguf::Value::U32(1)),
       absl::StatusCode::kInvalidArgument, "layer 4 is counted as an MTP block"},
      {"a rope scaling type", AddKey("step35.rope.scaling.type", gguf::Value::String("yarn")),
       absl::StatusCode::kUnimplemented, "step35.rope.scaling.type\" = \"yarn\": rope scaling is not supported"},
      {"a rope scaling factor", AddKey("step35.rope.scaling.factor", gguf::Value::F32(4.0f)),
       absl::StatusCode::kUnimplemented, "step35.rope.scaling.factor\" = 4: rope scaling is not supported"},
      {"a pattern of the wrong type", SetKey("step35.attention.sliding_window_pattern", gguf::Value::U32(1)),
       absl::StatusCode::kInvalidArgument, "step35.attention.sliding_window_pattern"},
      {"no pattern", DropKey("step35.attention.sliding_window_pattern"), absl::StatusCode::kNotFound,
       "step35.attention.sliding_window_pattern\" not found"},
      {"a base of 0", AddKey("step35.rope.freq_base_swa", gguf::Value::F32(0.0f)), absl::StatusCode::kInvalidArgument,
       "step35.rope.freq_base_swa = 0 must be > 0"},
      // Arrays longer than block_count too (llama.cpp refuses any other length; they were cut).
      {"kv heads longer than the layers", SetKey("step35.attention.head_count_kv", I32Array({2, 2, 2, 2, 2, 9})),
       absl::StatusCode::kInvalidArgument, "step35.attention.head_count_kv\" has 6 entries, expected 5"},
      {"clamps longer than the layers", SetKey("step35.swiglu_clamp_exp", F32Array({0, 1.5f, 1.5f, 1.5f, 1.5f, 1})),
       absl::StatusCode::kInvalidArgument, "step35.swiglu_clamp_exp has 6 entries, expected one per layer (5)"},
      {"block count 0", SetKey("step35.block_count", gguf::Value::U32(0)), absl::StatusCode::kInvalidArgument,
       "step35.block_count = 0"},
      {"block count past the file's layers", SetKey("step35.block_count", gguf::Value::U32(1000000000)),
       absl::StatusCode::kInvalidArgument, "step35.block_count is 1000000000, but the file holds no tensor of layer 5"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    auto f = EditedGguf(*OpenTiny(), c.edits);
    ASSERT_NE(f, nullptr);
    auto h = ReadStep35Hparams(*f);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), c.code) << h.status();
    EXPECT_TRUE(absl::StrContains(h.status().message(), c.message)) << h.status();
  }
  // A MoE layer without its routed or shared experts names the tensor.
  for (const std::string missing : {"blk.2.ffn_down_exps.weight", "blk.3.ffn_up_shexp.weight"}) {
    GgufEdits drop;
    drop.tensor = [missing](const std::string& name, std::vector<int64_t>&, std::vector<uint8_t>&) {
      return name != missing;
    };
    auto nd = EditedGguf(*OpenTiny(), drop);
    ASSERT_NE(nd, nullptr);
    auto h = ReadStep35Hparams(*nd);
    ASSERT_FALSE(h.ok());
    EXPECT_TRUE(absl::StrContains(h.status().message(), missing)) << h.status();
  }
  // A shared-expert clamp on the dense layer is llama.cpp's clamp of its dense FFN: accepted.
  auto dense_clamp = EditedGguf(*OpenTiny(), SetKey("step35.swiglu_clamp_shexp", F32Array({3, 2, 2, 2, 2})));
  ASSERT_NE(dense_clamp, nullptr);
  auto dc = ReadStep35Hparams(*dense_clamp);
  ASSERT_TRUE(dc.ok()) << dc.status();
  EXPECT_EQ(dc->clamp_shexp[0], 3.0);
}

}  // namespace
}  // namespace memra::frontends
