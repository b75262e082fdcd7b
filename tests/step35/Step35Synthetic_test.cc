// memra gen's step35 presets: the tiny preset has the shared step35-tiny fixture's config and
// tensors (read back through memra's step35 reader), the published preset has Step 3.5 Flash's
// parameter counts and llama-quantize's q4_k_m types, the Llama-3 RoPE factors are the
// converter's, and a generated model lowers, runs on the CPU and chats through its template.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/step35/Step35Hparams.h"
#include "frontends/synthetic/Step35Synthetic.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/formats/Quant.h"
#include "tests/LoadedModel.h"
#include "tests/TestUtil.h"

namespace memra {
namespace {

using formats::GgmlType;

std::string Write(const synthetic::Step35Shape& shape, const char* dtype) {
  synthetic::SyntheticOptions opt;
  opt.dtype = dtype;
  opt.seed = 1;
  opt.threads = 2;
  opt.progress = false;
  const std::string path = testing::UniqueTempPath(shape.name + "-" + dtype + ".gguf");
  auto stats = synthetic::WriteSyntheticStep35(shape, opt, path);
  EXPECT_TRUE(stats.ok()) << stats.status();
  return path;
}

synthetic::Step35Shape Preset(const char* name) {
  auto shape = synthetic::Step35Preset(name);
  EXPECT_TRUE(shape.ok()) << shape.status();
  return shape.ok() ? *shape : synthetic::Step35Shape{};
}

TEST(Step35SyntheticTest, TinyHasTheFixtureConfigAndTensors) {
  const std::string fixture = testing::TestDataPath("models/step35-tiny-q8_0.gguf");
  if (!testing::FileExists(fixture)) GTEST_SKIP() << "fixture model missing: " << fixture;
  const std::string path = Write(Preset("step35-tiny"), "q8_0");
  auto gen = gguf::GgufFile::Open(path);
  ASSERT_TRUE(gen.ok()) << gen.status();
  auto ref = gguf::GgufFile::Open(fixture);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto hg = frontends::ReadStep35Hparams(**gen);
  auto hr = frontends::ReadStep35Hparams(**ref);
  ASSERT_TRUE(hg.ok()) << hg.status();
  ASSERT_TRUE(hr.ok()) << hr.status();
  hg->n_vocab = hr->n_vocab;
  EXPECT_EQ(frontends::Step35Attributes(*hg).ToString(), frontends::Step35Attributes(*hr).ToString());
  // Same tensors, shapes (the vocabulary aside) and q8_0-file types (the router stays f32).
  ASSERT_EQ((*gen)->tensors().size(), (*ref)->tensors().size());
  for (const auto& t : (*ref)->tensors()) {
    const gguf::TensorInfo* g = (*gen)->FindTensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    std::vector<int64_t> ne = t.ne;
    if (t.name == "token_embd.weight" || t.name == "output.weight") ne[1] = 1024;
    EXPECT_EQ(g->ne, ne) << t.name;
    EXPECT_EQ(g->type, t.type) << t.name;
  }
  std::remove(path.c_str());
}

TEST(Step35SyntheticTest, FlashHasThePublishedSizesAndQ4KMTypes) {
  // Step 3.5 Flash: 196 B parameters (the trunk: 196.96 B with both embedding tables), 11 B
  // active per token (8 of 288 experts and the shared one; embeddings left out).
  const synthetic::Step35Shape s = Preset("step35-flash");
  EXPECT_EQ(s.n_layer, 45u);
  EXPECT_EQ(s.Heads(0), 64u);
  EXPECT_EQ(s.Heads(1), 96u);
  EXPECT_EQ(s.HeadsKv(1), 8u);
  EXPECT_EQ(s.swa[44], false);  // 0, 4, ..., 44: the 12 full-attention layers
  EXPECT_EQ(s.clamp_exp[43], 7.0f);
  EXPECT_EQ(s.clamp_shexp[44], 16.0f);
  EXPECT_EQ(s.clamp_exp[42], 0.0f);
  auto types = synthetic::Step35TensorTypes(s, "q4_k_m");
  ASSERT_TRUE(types.ok()) << types.status();
  double params = 0, active = 0;
  for (const auto& t : *types) {
    double n = 1;
    for (int64_t d : t.ne) n *= d;
    params += n;
    const bool embedding = t.name == "token_embd.weight" || t.name == "output.weight";
    if (!embedding) active += absl::StrContains(t.name, "_exps.") ? n * 8 / 288 : n;
    // llama-quantize's q4_k_m of a bf16 conversion: every matrix a k-quant; 1-D tensors, the router
    // and the rope factors f32.
    if (t.ne.size() == 1 || absl::StrContains(t.name, "ffn_gate_inp")) {
      EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
    } else {
      EXPECT_TRUE(formats::TraitsOf(t.type).quantized) << t.name;
    }
  }
  EXPECT_NEAR(params * 1e-9, 196.96, 0.01);
  EXPECT_NEAR(active * 1e-9, 11.0, 0.2);
  // The scaled-down preset: the same geometry in 8 layers (2 full-attention groups, 5 MoE layers).
  const synthetic::Step35Shape m = Preset("step35-flash-8l");
  EXPECT_EQ(m.n_layer, 8u);
  EXPECT_EQ(m.n_expert, s.n_expert);
  EXPECT_EQ(m.clamp_exp[7], 7.0f);
  auto mtypes = synthetic::Step35TensorTypes(m, "q4_k_m");
  ASSERT_TRUE(mtypes.ok()) << mtypes.status();
  double mparams = 0;
  for (const auto& t : *mtypes) {
    double n = 1;
    for (int64_t d : t.ne) n *= d;
    mparams += n;
  }
  EXPECT_NEAR(mparams * 1e-9, 25.01, 0.01);
  EXPECT_FALSE(synthetic::Step35Preset("step35-mini").ok());
}

TEST(Step35SyntheticTest, Llama3RopeFactorsAreTheConvertersAndRun) {
  // A tiny model with the full layers' Llama-3 scaling over a short original context, so all three
  // bands show up among its 8 rotated pairs (full layers rotate 16 of 32 dims).
  synthetic::Step35Shape s = Preset("step35-tiny");
  s.name = "step35-tiny-llama3";
  s.rope_llama3_factor = 2.0;
  s.rope_llama3_low = 1.0;
  s.rope_llama3_high = 4.0;
  s.rope_llama3_original_ctx = 64;
  const std::string path = Write(s, "f32");
  auto f = gguf::GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const gguf::TensorInfo* rf = (*f)->FindTensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  ASSERT_EQ(rf->NumElements(), 16);
  std::vector<float> v(16);
  ASSERT_TRUE(formats::Dequantize(rf->type, rf->data, absl::MakeSpan(v)).ok());
  // conversion/step3.py: wavelength 2 pi 5e6^(2i/16) against 64 / 4 and 64 / 1 (pair 0 keeps
  // 1.0, pair 1 is smoothed, the rest get the factor 2).
  for (int i = 0; i < 8; ++i) {
    const double wavelen = 2 * M_PI * std::pow(5e6, 2.0 * i / 16);
    double want = 2.0;
    if (wavelen < 16.0) {
      want = 1.0;
    } else if (wavelen <= 64.0) {
      const double smooth = (64.0 / wavelen - 1.0) / 3.0;
      want = 1.0 / ((1.0 - smooth) / 2.0 + smooth);
    }
    EXPECT_FLOAT_EQ(v[i], static_cast<float>(want)) << i;
  }
  for (int i = 8; i < 16; ++i) EXPECT_EQ(v[i], 1.0f) << i;  // the sliding layers' pairs
  // The factors change the full layers' rotation, hence the logits.
  frontends::LowerOptions lo;
  auto scaled = testing::LoadModel(path, lo);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  s.rope_llama3_factor = 0;
  const std::string plain_path = Write(s, "f32");
  auto plain = testing::LoadModel(plain_path, lo);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  auto a = scaled->Prefill(prompt);
  auto b = plain->Prefill(prompt);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  double diff = 0;
  for (size_t i = 0; i < a->size(); ++i) diff = std::max(diff, double(std::fabs((*a)[i] - (*b)[i])));
  EXPECT_GT(diff, 1e-4);
  std::remove(path.c_str());
  std::remove(plain_path.c_str());
}

TEST(Step35SyntheticTest, GeneratedModelRunsOnTheCpuAndChats) {
  // The tiny preset: its byte-level BPE vocabulary and ChatML template.
  const std::string path = Write(Preset("step35-tiny"), "q8_0");
  frontends::LowerOptions lo;
  auto model = testing::LoadModel(path, lo);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tok = tokenizer::Tokenizer::FromGguf(*model->file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto chat = tokenizer::ChatTemplate::FromTokenizer(**tok);
  ASSERT_TRUE(chat.ok()) << chat.status();
  tokenizer::ChatInputs in;
  in.messages = tokenizer::ChatInputs::Messages({{"user", "What is the capital of France?"}});
  auto prompt = (*chat)->Apply(in);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_TRUE(absl::StartsWith(*prompt, "<|im_start|>user\n")) << *prompt;
  tokenizer::EncodeOptions eo;
  eo.add_special = false;
  const std::vector<int32_t> ids = (*tok)->Encode(*prompt, eo);
  ASSERT_GT(ids.size(), 8u);
  // The init keeps the logits O(1): neither collapsed nor blown up.
  auto logits = model->Prefill(ids);
  ASSERT_TRUE(logits.ok()) << logits.status();
  const int64_t V = 1024;
  ASSERT_EQ(logits->size(), static_cast<size_t>(V));
  double sum = 0, sum2 = 0;
  for (float x : *logits) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum2 += double(x) * x;
  }
  const double sd = std::sqrt(sum2 / V - (sum / V) * (sum / V));
  EXPECT_GT(sd, 0.3);
  EXPECT_LT(sd, 10.0);
  auto greedy = model->Greedy(ids, 8);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(greedy->size(), 8u);
  EXPECT_TRUE((*tok)->Decode(*greedy).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memra
