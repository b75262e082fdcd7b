// memra gen: synthetic qwen35 files have the real layout (same tensors and keys as the shared
// fixture of the same shape), are deterministic, and load through the reader.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "frontends/gguf/GgufFile.h"
#include "frontends/synthetic/Qwen35Synthetic.h"
#include "gtest/gtest.h"
#include "kernels/formats/Quant.h"
#include "tests/TestUtil.h"

namespace memra {
namespace {

using formats::GgmlType;

std::string TempPath(const std::string& name) { return memra::testing::UniqueTempPath(name); }

std::string Write(const std::string& name, const char* dtype, uint64_t seed, int threads, int64_t tile_elems = 0) {
  auto shape = synthetic::Qwen35Preset("tiny");
  EXPECT_TRUE(shape.ok());
  synthetic::SyntheticOptions opt;
  opt.dtype = dtype;
  opt.seed = seed;
  opt.threads = threads;
  opt.progress = false;
  opt.tile_elems = tile_elems;
  std::string path = TempPath(name);
  auto stats = synthetic::WriteSyntheticQwen35(*shape, opt, path);
  EXPECT_TRUE(stats.ok()) << stats.status();
  return path;
}

TEST(GenTest, TinyHasTheFixtureLayout) {
  std::string path = Write("gen-tiny-f32.gguf", "f32", 1, 2);
  auto gen = gguf::GgufFile::Open(path);
  ASSERT_TRUE(gen.ok()) << gen.status();
  const std::string fixture = testing::TestDataPath("models/qwen35-tiny-f32.gguf");
  if (!testing::FileExists(fixture)) GTEST_SKIP() << "fixture model missing: " << fixture;
  auto ref = gguf::GgufFile::Open(fixture);
  ASSERT_TRUE(ref.ok()) << ref.status();
  // Same tensors, shapes and types.
  ASSERT_EQ((*gen)->tensors().size(), (*ref)->tensors().size());
  for (const auto& t : (*ref)->tensors()) {
    const gguf::TensorInfo* g = (*gen)->FindTensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(g->ne, t.ne) << t.name;
    EXPECT_EQ(g->type, t.type) << t.name;
  }
  // Every qwen35.* and tokenizer.* key of the fixture, with equal values.
  for (const auto& [key, value] : (*ref)->metadata()) {
    if (key.rfind("general.", 0) == 0) continue;
    const gguf::Value* v = (*gen)->Find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(*v == value) << key << ": " << v->ToString() << " vs " << value.ToString();
  }
}

TEST(GenTest, DeterministicAcrossThreadCounts) {
  auto a = testing::ReadFileBytes(Write("gen-a.gguf", "q8_0", 7, 1));
  auto b = testing::ReadFileBytes(Write("gen-b.gguf", "q8_0", 7, 3));
  auto c = testing::ReadFileBytes(Write("gen-c.gguf", "q8_0", 8, 3));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

// --fill tiled: a tensor of more than the tile repeats the bytes of its first tile (whole random
// streams of 65,536 values) to its end, the same on any thread count; smaller tensors and the f32
// ones drawn from other laws are the drawn file's, byte for byte.
TEST(GenTest, TiledFillRepeatsTheFirstStreams) {
  constexpr int64_t kTile = 65536;
  const std::string drawn = Write("gen-drawn.gguf", "q4_k_m", 5, 2);
  const std::string tiled = Write("gen-tiled.gguf", "q4_k_m", 5, 3, kTile);
  const std::string tiled1 = Write("gen-tiled1.gguf", "q4_k_m", 5, 1, kTile);
  auto fd = gguf::GgufFile::Open(drawn);
  auto ft = gguf::GgufFile::Open(tiled);
  ASSERT_TRUE(fd.ok() && ft.ok());
  auto a = testing::ReadFileBytes(tiled);
  auto b = testing::ReadFileBytes(tiled1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  int repeated = 0, same = 0;
  for (const gguf::TensorInfo& t : (*fd)->tensors()) {
    const gguf::TensorInfo* u = (*ft)->FindTensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    ASSERT_EQ(u->type, t.type) << t.name;
    ASSERT_EQ(u->data.size(), t.data.size()) << t.name;
    const auto& traits = formats::TraitsOf(t.type);
    const size_t tile_bytes = kTile / traits.block_elems * traits.block_bytes;
    if (t.NumElements() <= kTile) {
      EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), u->data.begin())) << t.name;
      ++same;
      continue;
    }
    // The first tile is the drawn one; every later byte repeats it.
    EXPECT_TRUE(std::equal(t.data.begin(), t.data.begin() + tile_bytes, u->data.begin())) << t.name;
    bool periodic = true;
    for (size_t i = tile_bytes; i < u->data.size() && periodic; ++i) periodic = u->data[i] == u->data[i % tile_bytes];
    EXPECT_TRUE(periodic) << t.name;
    ++repeated;
  }
  EXPECT_GT(repeated, 0);
  EXPECT_GT(same, 0);
  // A tile rounds up to whole streams: 100,000 values are 2 streams, all of a 256 x 512 matrix.
  auto fr = gguf::GgufFile::Open(Write("gen-tiled-round.gguf", "q4_k_m", 5, 2, 100000));
  ASSERT_TRUE(fr.ok());
  const gguf::TensorInfo* up_drawn = (*fd)->FindTensor("blk.0.ffn_up.weight");
  const gguf::TensorInfo* up_round = (*fr)->FindTensor("blk.0.ffn_up.weight");
  ASSERT_TRUE(up_drawn != nullptr && up_round != nullptr);
  ASSERT_EQ(up_drawn->NumElements(), 2 * kTile);
  EXPECT_TRUE(std::equal(up_drawn->data.begin(), up_drawn->data.end(), up_round->data.begin()));
}

TEST(GenTest, WeightStatisticsFollowTheInitScheme) {
  std::string path = Write("gen-tiny-bf16.gguf", "bf16", 3, 2);
  auto f = gguf::GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  auto stats = [&](const std::string& name, double* mean, double* stdev) {
    const gguf::TensorInfo* t = (*f)->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    std::vector<float> v(t->NumElements());
    ASSERT_TRUE(formats::Dequantize(t->type, t->data, absl::MakeSpan(v)).ok());
    double s = 0, s2 = 0;
    for (float x : v) {
      s += x;
      s2 += double(x) * x;
    }
    *mean = s / v.size();
    *stdev = std::sqrt(s2 / v.size() - *mean * *mean);
  };
  double m, sd;
  stats("token_embd.weight", &m, &sd);
  EXPECT_NEAR(m, 0.0, 0.02);
  EXPECT_NEAR(sd, 1.0, 0.02);
  stats("blk.0.attn_qkv.weight", &m, &sd);
  EXPECT_NEAR(sd, 1.0 / 16.0, 0.003);  // 1/sqrt(fan_in 256)
  stats("blk.0.attn_norm.weight", &m, &sd);
  EXPECT_NEAR(m, 1.0, 0.05);
  stats("blk.0.ssm_a", &m, &sd);
  EXPECT_LT(m, -1.0);
  EXPECT_EQ((*f)->FindTensor("blk.0.ssm_conv1d.weight")->type, GgmlType::kF32);
  EXPECT_EQ((*f)->FindTensor("blk.0.attn_qkv.weight")->type, GgmlType::kBF16);
}

TEST(GenTest, RealPresetsHaveTheQwen35Sizes) {
  // Parameter counts implied by the presets (no file written): 9b is ~8.95e9 weights.
  for (const char* name : {"0.8b", "2b", "4b", "9b", "27b"}) {
    auto s = synthetic::Qwen35Preset(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_EQ(s->n_vocab, 248320u);
    EXPECT_EQ(s->head_dim, 256u);
    EXPECT_EQ(s->d_inner(), s->ssm_n_v_heads * 128u);
  }
  EXPECT_FALSE(synthetic::Qwen35Preset("70b").ok());
}

// moe-tiny: the layout of the shared qwen35moe-tiny fixture (same tensors, shapes, types in q8_0,
// the same qwen35moe.* keys), and it lowers through the qwen35moe family.
TEST(GenTest, MoeTinyHasTheMoeFixtureLayout) {
  auto shape = synthetic::Qwen35Preset("moe-tiny");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->arch(), "qwen35moe");
  synthetic::SyntheticOptions opt;
  opt.dtype = "q8_0";
  opt.progress = false;
  const std::string path = TempPath("gen-moe-tiny-q8_0.gguf");
  auto stats = synthetic::WriteSyntheticQwen35(*shape, opt, path);
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto gen = gguf::GgufFile::Open(path);
  ASSERT_TRUE(gen.ok()) << gen.status();
  const std::string fixture = testing::TestDataPath("models/qwen35moe-tiny-q8_0.gguf");
  if (!testing::FileExists(fixture)) GTEST_SKIP() << "fixture model missing: " << fixture;
  auto ref = gguf::GgufFile::Open(fixture);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ((*gen)->tensors().size(), (*ref)->tensors().size());
  for (const auto& t : (*ref)->tensors()) {
    const gguf::TensorInfo* g = (*gen)->FindTensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(g->ne, t.ne) << t.name;
    EXPECT_EQ(formats::GgmlTypeName(g->type), formats::GgmlTypeName(t.type)) << t.name;
  }
  for (const auto& [key, value] : (*ref)->metadata()) {
    if (key.rfind("general.", 0) == 0) continue;
    const gguf::Value* v = (*gen)->Find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(*v == value) << key << ": " << v->ToString() << " vs " << value.ToString();
  }
}

// 35b-a3b: Qwen3.5-35B-A3B's shapes, and llama-quantize's q4_k_m / q8_0 types for its experts
// (no file written).
TEST(GenTest, Moe35bA3bHasTheQwen35MoeShapesAndMixes) {
  auto s = synthetic::Qwen35Preset("35b-a3b");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->arch(), "qwen35moe");
  EXPECT_EQ(s->n_embd, 2048u);
  EXPECT_EQ(s->n_layer, 40u);
  EXPECT_EQ(s->full_attention_interval, 4u);
  EXPECT_EQ(s->n_head, 16u);
  EXPECT_EQ(s->n_head_kv, 2u);
  EXPECT_EQ(s->head_dim, 256u);
  EXPECT_EQ(s->n_rot, 64u);
  EXPECT_EQ(s->ssm_n_k_heads, 16u);
  EXPECT_EQ(s->ssm_n_v_heads, 32u);
  EXPECT_EQ(s->ssm_d_state, 128u);
  EXPECT_EQ(s->n_expert, 256u);
  EXPECT_EQ(s->n_expert_used, 8u);
  EXPECT_EQ(s->n_ff_exp, 512u);
  EXPECT_EQ(s->n_ff_shexp, 512u);
  EXPECT_EQ(s->n_vocab, 248320u);
  EXPECT_FALSE(s->tied_output);
  auto q4 = synthetic::Qwen35TensorTypes(*s, "q4_k_m");
  ASSERT_TRUE(q4.ok()) << q4.status();
  uint64_t n_params = 0;
  std::map<std::string, std::string> type;
  for (const auto& t : *q4) {
    uint64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    n_params += n;
    type[t.name] = std::string(formats::GgmlTypeName(t.type));
  }
  std::printf("  35b-a3b: %.3f B parameters\n", n_params / 1e9);
  EXPECT_GT(n_params, 34.0e9);
  EXPECT_LT(n_params, 36.0e9);
  EXPECT_EQ(type["blk.0.ffn_gate_exps.weight"], "q4_K");
  EXPECT_EQ(type["blk.0.ffn_up_exps.weight"], "q4_K");
  // ffn_down (routed and shared) by the layer in the name: use_more_bits(0 / 7, 40) -> q6_K, 5 -> q4_K.
  EXPECT_EQ(type["blk.0.ffn_down_exps.weight"], "q6_K");
  EXPECT_EQ(type["blk.0.ffn_down_shexp.weight"], "q6_K");
  EXPECT_EQ(type["blk.5.ffn_down_exps.weight"], "q4_K");
  EXPECT_EQ(type["blk.7.ffn_down_exps.weight"], "q6_K");
  EXPECT_EQ(type["blk.0.ffn_gate_inp.weight"], "f32");
  EXPECT_EQ(type["blk.0.ffn_gate_inp_shexp.weight"], "f32");
  EXPECT_EQ(type["output.weight"], "q6_K");
  auto q8 = synthetic::Qwen35TensorTypes(*s, "q8_0");
  ASSERT_TRUE(q8.ok()) << q8.status();
  for (const auto& t : *q8)
    if (t.ne.size() == 3) EXPECT_EQ(formats::GgmlTypeName(t.type), "q8_0") << t.name;
}

}  // namespace
}  // namespace memra
