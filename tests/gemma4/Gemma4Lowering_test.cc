// Lowering of gemma4 GGUFs: the module's layout (KV states only on KV-owning layers, shared layers
// attending earlier layers' caches, windows on sliding layers, rope factors on full layers), its
// printed IR round-trip, and the bad input, each an error naming the key before anything
// is uploaded: inconsistent per-layer arrays, head counts that do not divide, a KV share past the
// owning layers or onto the other kind, a window of 0, missing keys and tensors.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "frontends/gemma4/Gemma4Lowering.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
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

const std::string kDense = SharedPath("fixtures/models/gemma4-tiny-f32.gguf");

std::unique_ptr<gguf::GgufFile> OpenDense() {
  auto f = gguf::GgufFile::Open(kDense);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

gguf::Value I32Array(std::vector<int32_t> v) {
  std::vector<gguf::Value> e;
  for (int32_t x : v) e.push_back(gguf::Value::I32(x));
  return gguf::Value::Array(gguf::ValueType::kI32, e);
}
gguf::Value BoolArray(std::vector<bool> v) {
  std::vector<gguf::Value> e;
  for (bool x : v) e.push_back(gguf::Value::Bool(x));
  return gguf::Value::Array(gguf::ValueType::kBool, e);
}

TEST(Gemma4LoweringTest, ModuleLayout) {
  if (!FileExists(kDense)) GTEST_SKIP() << kDense << " not found";
  auto f = OpenDense();
  auto m = LowerGemma4(*f);
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Module& mod = **m;
  // KV states: layers 0-3 own them (6 layers, 2 shared); [n_ctx, Hkv, D] with the layer's sizes.
  std::vector<std::string> kv;
  for (const auto& st : mod.states())
    if (st->state_kind() == ir::StateKind::kKv) kv.push_back(st->name() + " " + st->type().ToString());
  EXPECT_EQ(kv, (std::vector<std::string>{"blk.0.k_cache f32[4096, 2, 32]", "blk.0.v_cache f32[4096, 2, 32]",
                                          "blk.1.k_cache f32[4096, 2, 32]", "blk.1.v_cache f32[4096, 2, 32]",
                                          "blk.2.k_cache f32[4096, 2, 32]", "blk.2.v_cache f32[4096, 2, 32]",
                                          "blk.3.k_cache f32[4096, 1, 64]", "blk.3.v_cache f32[4096, 1, 64]"}));
  // Per layer in @prefill: the caches attention reads, its window, and whether its ropes take
  // rope_freqs.
  std::vector<std::string> attn;
  int ff_ropes = 0;
  for (const ir::Op* op : mod.function("prefill")->Ops()) {
    if (op->is(ir::OpKind::kAttention))
      attn.push_back(op->operand(1)->name() + " w" + std::to_string(op->attrs().I64Or("window", 0)));
    if (op->is(ir::OpKind::kRope) && op->num_operands() == 3) ++ff_ropes;
  }
  EXPECT_EQ(attn, (std::vector<std::string>{"blk.0.k_cache w16", "blk.1.k_cache w16", "blk.2.k_cache w16",
                                            "blk.3.k_cache w0", "blk.2.k_cache w16", "blk.3.k_cache w0"}));
  EXPECT_EQ(ff_ropes, 3);  // q and k of layer 3, q of layer 5 (shared: no k)
  // The printed module parses back to the same text.
  const std::string text = ir::ToText(mod);
  auto again = ir::ParseModule(text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ir::ToText(**again), text);
}

// A context longer than the window plus one call's rows: the sliding layers keep rings of
// W + max_call_rows - 1 rows (state and op attribute "ring", module "max_call_rows"), the full
// layers the whole context; the ring round-trips through the printed IR. At the default context
// (4096 < 16 + 4095) nothing is a ring.
TEST(Gemma4LoweringTest, SlidingLayersKeepRingsOfTheWindow) {
  if (!FileExists(kDense)) GTEST_SKIP() << kDense << " not found";
  auto f = OpenDense();
  LowerOptions lo;
  lo.n_ctx = 65536;
  auto m = LowerGemma4(*f, lo);
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Module& mod = **m;
  std::vector<std::string> kv;
  for (const auto& st : mod.states())
    if (st->state_kind() == ir::StateKind::kKv && absl::StrContains(st->name(), "k_cache"))
      kv.push_back(st->name() + " " + st->type().ToString() + " ring " + std::to_string(st->attrs().I64Or("ring", 0)));
  EXPECT_EQ(kv, (std::vector<std::string>{
                    "blk.0.k_cache f32[4111, 2, 32] ring 16", "blk.1.k_cache f32[4111, 2, 32] ring 16",
                    "blk.2.k_cache f32[4111, 2, 32] ring 16", "blk.3.k_cache f32[65536, 1, 64] ring 0"}));
  EXPECT_EQ(mod.attrs().I64Or("max_call_rows", 0), 4096);
  std::vector<std::string> ops;
  for (const ir::Op* op : mod.function("decode")->Ops())
    if (op->is(ir::OpKind::kKvAppend) || op->is(ir::OpKind::kAttention))
      ops.push_back(std::string(op->info().mnemonic) + " " +
                    op->operand(op->is(ir::OpKind::kKvAppend) ? 2 : 1)->name() + " ring " +
                    std::to_string(op->attrs().I64Or("ring", 0)));
  EXPECT_EQ(ops, (std::vector<std::string>{"kv_append blk.0.k_cache ring 16", "attention blk.0.k_cache ring 16",
                                           "kv_append blk.1.k_cache ring 16", "attention blk.1.k_cache ring 16",
                                           "kv_append blk.2.k_cache ring 16", "attention blk.2.k_cache ring 16",
                                           "kv_append blk.3.k_cache ring 0", "attention blk.3.k_cache ring 0",
                                           "attention blk.2.k_cache ring 16", "attention blk.3.k_cache ring 0"}));
  const std::string text = ir::ToText(mod);
  auto again = ir::ParseModule(text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ir::ToText(**again), text);
  // The default context: no ring.
  auto plain = LowerGemma4(*f);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->attrs().Has("max_call_rows"));
  // max_call_rows must be positive.
  lo.max_call_rows = 0;
  auto bad = LowerGemma4(*f, lo);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "max_call_rows")) << bad.status();
}

struct BadCase {
  const char* what;
  GgufEdits edits;
  absl::StatusCode code;
  const char* message;
};

TEST(Gemma4LoweringTest, BadInputIsNamed) {
  if (!FileExists(kDense)) GTEST_SKIP() << kDense << " not found";
  const std::vector<BadCase> cases = {
      {"pattern shorter than the layers", SetKey("gemma4.attention.sliding_window_pattern", BoolArray({true, false})),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.sliding_window_pattern has 2 entries, expected 6"},
      {"kv heads that do not divide", SetKey("gemma4.attention.head_count_kv", I32Array({3, 2, 2, 1, 2, 1})),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.head_count (4) must be a multiple of"},
      {"head counts array too short", SetKey("gemma4.attention.head_count_kv", I32Array({2, 2})),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.head_count_kv\" has 2 entries, expected 6"},
      {"kv share past the owning layers", SetKey("gemma4.attention.shared_kv_layers", gguf::Value::U32(6)),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.shared_kv_layers (6) must be in [0, "},
      {"kv share onto the other kind",
       SetKey("gemma4.attention.sliding_window_pattern", BoolArray({true, true, false, true, true, false})),
       absl::StatusCode::kInvalidArgument, "layer 4 shares the KV cache of layer 2"},
      {"window of 0", SetKey("gemma4.attention.sliding_window", gguf::Value::U32(0)),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.sliding_window must be > 0"},
      {"no window", DropKey("gemma4.attention.sliding_window"), absl::StatusCode::kNotFound,
       "gemma4.attention.sliding_window"},
      {"key and value lengths differ", SetKey("gemma4.attention.value_length", gguf::Value::U32(32)),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.key_length (64) and gemma4.attention.value_length (32)"},
      {"rotary dims past the head", SetKey("gemma4.rope.dimension_count_swa", gguf::Value::U32(48)),
       absl::StatusCode::kInvalidArgument, "gemma4.rope.dimension_count_swa (48) must be even"},
      // Longer arrays too (llama.cpp refuses any length but block_count; they were cut silently).
      {"pattern longer than the layers",
       SetKey("gemma4.attention.sliding_window_pattern", BoolArray({true, true, true, false, true, false, true})),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.sliding_window_pattern has 7 entries, expected 6"},
      {"head counts array too long", SetKey("gemma4.attention.head_count_kv", I32Array({2, 2, 2, 1, 2, 1, 9})),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.head_count_kv\" has 7 entries, expected 6"},
      {"a negative head count", SetKey("gemma4.attention.head_count", I32Array({4, 4, -4, 4, 4, 4})),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.head_count = -4 at layer 2"},
      {"kv share with no owner of its kind", SetKey("gemma4.attention.shared_kv_layers", gguf::Value::U32(5)),
       absl::StatusCode::kInvalidArgument, "gemma4.attention.shared_kv_layers (5): layer 1 shares a KV cache"},
      // A count past the file's layers is refused before per-layer tables of that size are made.
      {"block count past the file's layers", SetKey("gemma4.block_count", gguf::Value::U32(1000000000)),
       absl::StatusCode::kInvalidArgument, "gemma4.block_count is 1000000000, but the file holds no tensor of layer 6"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    auto f = EditedGguf(*OpenDense(), c.edits);
    ASSERT_NE(f, nullptr);
    auto m = LowerGemma4(*f);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), c.code) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), c.message)) << m.status();
  }
  // A missing KV projection in a KV-owning layer names the tensor.
  GgufEdits no_k;
  no_k.tensor = [](const std::string& name, std::vector<int64_t>&, std::vector<uint8_t>&) {
    return name != "blk.1.attn_k.weight";
  };
  auto nk = EditedGguf(*OpenDense(), no_k);
  ASSERT_NE(nk, nullptr);
  auto m = LowerGemma4(*nk);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "blk.1.attn_k.weight")) << m.status();
}

// An E-variant file whose per-layer-input key is missing or 0 holds tensors nothing would read: the
// model would run without its per-layer inputs (silently wrong), so it is refused by name.
TEST(Gemma4LoweringTest, PerLayerInputTensorsNeedTheirKey) {
  const std::string e = SharedPath("fixtures/models/gemma4e-tiny-q8_0.gguf");
  if (!FileExists(e)) GTEST_SKIP() << e << " not found";
  auto base = gguf::GgufFile::Open(e);
  ASSERT_TRUE(base.ok()) << base.status();
  for (const auto& [what, edits] : std::vector<std::pair<std::string, GgufEdits>>{
           {"missing", DropKey("gemma4.embedding_length_per_layer_input")},
           {"0", SetKey("gemma4.embedding_length_per_layer_input", gguf::Value::U32(0))}}) {
    SCOPED_TRACE(what);
    auto f = EditedGguf(**base, edits);
    ASSERT_NE(f, nullptr);
    auto m = LowerGemma4(*f);
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(absl::StrContains(m.status().message(),
                                  "per_layer_token_embd.weight\" holds per-layer inputs, but "
                                  "gemma4.embedding_length_per_layer_input is " +
                                      what))
        << m.status();
  }
}

}  // namespace
}  // namespace memra::frontends
