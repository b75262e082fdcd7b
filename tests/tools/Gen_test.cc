// memra gen: synthetic qwen35 files have the real layout (same tensors and keys as the shared
// fixture of the same shape), are deterministic, and load through the reader.
#include <cmath>
#include <cstdio>
#include <set>

#include "frontends/gguf/GgufFile.h"
#include "frontends/synthetic/Qwen35Synthetic.h"
#include "gtest/gtest.h"
#include "kernels/formats/Quant.h"
#include "tests/TestUtil.h"

namespace memra {
namespace {

using formats::GgmlType;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::string Write(const std::string& name, const char* dtype, uint64_t seed, int threads) {
  auto shape = synthetic::Qwen35Preset("tiny");
  EXPECT_TRUE(shape.ok());
  synthetic::SyntheticOptions opt;
  opt.dtype = dtype;
  opt.seed = seed;
  opt.threads = threads;
  opt.progress = false;
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

}  // namespace
}  // namespace memra
