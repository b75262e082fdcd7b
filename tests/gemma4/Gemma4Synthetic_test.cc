// memra gen's gemma4 presets: the tiny preset has the shared gemma4-tiny fixture's config and
// tensors (read back through memra's gemma4 reader), the published presets have the published
// parameter counts, and a generated model lowers, runs on the CPU and chats through its template.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "frontends/gemma4/Gemma4Hparams.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/synthetic/Gemma4Synthetic.h"
#include "frontends/synthetic/Gemma4SyntheticVocab.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/formats/Quant.h"
#include "tests/LoadedModel.h"
#include "tests/TestUtil.h"

namespace memra {
namespace {

using formats::GgmlType;

std::string Write(const std::string& preset, const char* dtype) {
  auto shape = synthetic::Gemma4Preset(preset);
  EXPECT_TRUE(shape.ok()) << shape.status();
  synthetic::SyntheticOptions opt;
  opt.dtype = dtype;
  opt.seed = 1;
  opt.threads = 2;
  opt.progress = false;
  const std::string path = testing::UniqueTempPath(preset + "-" + dtype + ".gguf");
  auto stats = synthetic::WriteSyntheticGemma4(*shape, opt, path);
  EXPECT_TRUE(stats.ok()) << stats.status();
  return path;
}

TEST(Gemma4SyntheticTest, TinyHasTheFixtureConfigAndTensors) {
  const std::string fixture = testing::TestDataPath("models/gemma4-tiny-q8_0.gguf");
  if (!testing::FileExists(fixture)) GTEST_SKIP() << "fixture model missing: " << fixture;
  const std::string path = Write("gemma4-tiny", "q8_0");
  auto gen = gguf::GgufFile::Open(path);
  ASSERT_TRUE(gen.ok()) << gen.status();
  auto ref = gguf::GgufFile::Open(fixture);
  ASSERT_TRUE(ref.ok()) << ref.status();
  // The config memra reads from both files is the same (the vocabulary aside).
  auto hg = frontends::ReadGemma4Hparams(**gen);
  auto hr = frontends::ReadGemma4Hparams(**ref);
  ASSERT_TRUE(hg.ok()) << hg.status();
  ASSERT_TRUE(hr.ok()) << hr.status();
  hg->n_vocab = hr->n_vocab;
  EXPECT_EQ(frontends::Gemma4Attributes(*hg).ToString(), frontends::Gemma4Attributes(*hr).ToString());
  // Same tensors, shapes (token_embd's vocabulary aside) and q8_0-file types, so llama-quantize's
  // mix (per_layer_model_proj and the router stay f32) is what memra gen writes.
  ASSERT_EQ((*gen)->tensors().size(), (*ref)->tensors().size());
  for (const auto& t : (*ref)->tensors()) {
    const gguf::TensorInfo* g = (*gen)->FindTensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    std::vector<int64_t> ne = t.ne;
    if (t.name == "token_embd.weight") ne[1] = 2048;
    EXPECT_EQ(g->ne, ne) << t.name;
    EXPECT_EQ(g->type, t.type) << t.name;
  }
  // rope_freqs: 8 rotated pairs of 32, the rest 1e30.
  const gguf::TensorInfo* rf = (*gen)->FindTensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  std::vector<float> v(rf->NumElements());
  ASSERT_TRUE(formats::Dequantize(rf->type, rf->data, absl::MakeSpan(v)).ok());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], i < 8 ? 1.0f : 1e30f) << i;
  std::remove(path.c_str());
}

TEST(Gemma4SyntheticTest, PublishedPresetsHaveThePublishedSizes) {
  // Text-model parameters of the published checkpoints (the model cards' totals include vision
  // and audio encoders for the E-models: their "effective" counts leave out the per-layer
  // embedding tables).
  struct Want {
    const char* preset;
    double total_b;           // with every embedding
    double per_layer_embd_b;  // per_layer_token_embd
  };
  for (const Want& w :
       {Want{"gemma4-31b", 30.70, 0.0}, Want{"gemma4-26b-a4b", 25.23, 0.0},
        Want{"gemma4-e4b", 7.46, 42 * 256 * 262144e-9}, Want{"gemma4-e2b", 4.63, 35 * 256 * 262144e-9}}) {
    auto shape = synthetic::Gemma4Preset(w.preset);
    ASSERT_TRUE(shape.ok()) << shape.status();
    auto types = synthetic::Gemma4TensorTypes(*shape, "q4_k_m");
    ASSERT_TRUE(types.ok()) << types.status();
    double params = 0, per_layer = 0;
    for (const auto& t : *types) {
      double n = 1;
      for (int64_t d : t.ne) n *= d;
      params += n;
      if (t.name == "per_layer_token_embd.weight") per_layer += n;
      // llama-quantize's q4_k_m of a bf16 conversion: matrices in k-quants; 1-D tensors and the
      // router f32 (as converted); the per-layer model projection, which it never quantizes, bf16.
      const bool f32 =
          t.ne.size() == 1 || absl::StrContains(t.name, "ffn_gate_inp") || absl::StrContains(t.name, "rope_freqs");
      if (f32) {
        EXPECT_EQ(t.type, GgmlType::kF32) << w.preset << " " << t.name;
      } else if (absl::StrContains(t.name, "per_layer_model_proj")) {
        EXPECT_EQ(t.type, GgmlType::kBF16) << w.preset << " " << t.name;
      } else {
        EXPECT_TRUE(formats::TraitsOf(t.type).quantized) << w.preset << " " << t.name;
      }
    }
    EXPECT_NEAR(params * 1e-9, w.total_b, 0.01 * w.total_b) << w.preset;
    EXPECT_NEAR(per_layer * 1e-9, w.per_layer_embd_b, 1e-6) << w.preset;
  }
  // The E-models' "effective" sizes (model cards: E2B 2.3B, E4B 4.5B): the rest.
  EXPECT_FALSE(synthetic::Gemma4Preset("gemma4-9b").ok());
}

TEST(Gemma4SyntheticTest, TinyRunsOnTheCpuAndChats) {
  const std::string path = Write("gemma4-tiny", "q8_0");
  frontends::LowerOptions lo;
  auto model = testing::LoadModel(path, lo);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tok = tokenizer::Tokenizer::FromGguf(*model->file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->model(), tokenizer::ModelType::kGemma4);
  auto chat = tokenizer::ChatTemplate::FromTokenizer(**tok);
  ASSERT_TRUE(chat.ok()) << chat.status();
  tokenizer::ChatInputs in;
  in.messages = tokenizer::ChatInputs::Messages({{"user", "What is the capital of France?"}});
  auto prompt = (*chat)->Apply(in);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  tokenizer::EncodeOptions eo;
  eo.add_special = false;
  const std::vector<int32_t> ids = (*tok)->Encode(*prompt, eo);
  ASSERT_EQ(ids.front(), synthetic::kGemma4Bos);
  // The init keeps the logits O(1) under the soft cap (README §9.2: std ~1.8): neither collapsed
  // nor saturated at the cap of 6.
  auto logits = model->Prefill(ids);
  ASSERT_TRUE(logits.ok()) << logits.status();
  const int64_t V = 2048;
  ASSERT_EQ(logits->size(), static_cast<size_t>(V));
  double s = 0, s2 = 0, max_abs = 0;
  for (float x : *logits) {
    ASSERT_TRUE(std::isfinite(x));
    s += x;
    s2 += double(x) * x;
    max_abs = std::max(max_abs, double(std::fabs(x)));
  }
  const double sd = std::sqrt(s2 / V - (s / V) * (s / V));
  EXPECT_GT(sd, 0.5);
  EXPECT_LT(sd, 4.0);
  EXPECT_LT(max_abs, 6.0);
  // Greedy decoding runs and its text decodes.
  auto greedy = model->Greedy(ids, 8);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(greedy->size(), 8u);
  EXPECT_TRUE((*tok)->Decode(*greedy).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memra
