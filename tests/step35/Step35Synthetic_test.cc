// memra gen's step35 presets: the tiny preset has the shared step35-tiny fixture's config and
// tensors (read back through memra's step35 reader), the published preset has Step 3.5 Flash's
// parameter counts and llama-quantize's q4_k_m types, the Llama-3 RoPE factors are the
// converter's, and a generated model lowers, runs on the CPU and chats through its template; the
// compile pipeline folds an ungated shared expert into moe_ffn_ungated where the routed and shared
// clamps agree, bit-identically.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/step35/Step35Hparams.h"
#include "frontends/synthetic/Step35Synthetic.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "kernels/formats/Quant.h"
#include "passes/Pipelines.h"
#include "runtime/Session.h"
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

// fuse-moe-ffn on Step 3.5's shared expert (no gate): the tiny preset with its MoE layers' clamps
// set so that layers 1-2 clamp nothing, layer 3 clamps both at 1.5 and layer 4 keeps the
// fixture's 1.5 / 2.0. The default pipeline forms moe_ffn_ungated on layers 1-3 only, and the
// compiled module's prefill (chunks of 16) and greedy decode logits equal the lowered module's
// bit for bit.
TEST(Step35SyntheticTest, PipelineFoldsTheUngatedSharedExpertBitIdentically) {
  synthetic::Step35Shape shape = Preset("step35-tiny");
  shape.clamp_exp = {0.0f, 0.0f, 0.0f, 1.5f, 1.5f};
  shape.clamp_shexp = {0.0f, 0.0f, 0.0f, 1.5f, 2.0f};
  const std::string path = Write(shape, "q8_0");
  auto open = [&](bool compiled) {
    runtime::SessionOptions so;
    so.threads = 2;
    so.chunk = compiled ? 16 : 0;
    so.prompt_logits = true;
    if (compiled) so.compile = [](ir::Module& m) { return testing::CompileModule(m, passes::kDefaultPipeline); };
    return runtime::Session::Open(path, so);
  };
  auto plain = open(false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = open(true);
  ASSERT_TRUE(fused.ok()) << fused.status();
  for (const char* fn : {"decode", "prefill_t16"}) {
    const ir::Function* f = (*fused)->module().function(fn);
    ASSERT_NE(f, nullptr) << fn;
    int ungated = 0, experts = 0, clamped = 0;
    for (const ir::Op* op : f->Ops()) {
      ungated += op->is(ir::OpKind::kMoeFfnUngated);
      clamped += op->is(ir::OpKind::kMoeFfnUngated) && op->attrs().F64Or("clamp", 0.0) == 1.5;
      experts += op->is(ir::OpKind::kMoeExperts);
    }
    EXPECT_EQ(ungated, 3) << fn;
    EXPECT_EQ(clamped, 1) << fn;
    EXPECT_EQ(experts, 1) << fn;  // layer 4: clamps 1.5 and 2.0
  }
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 11) % 1024));
  auto run = [&](runtime::Session& s, std::vector<float>& prompt_logits, std::vector<float>& decode_logits) {
    auto last = s.Prefill(prompt, &prompt_logits);
    ASSERT_TRUE(last.ok()) << last.status();
    std::vector<float> logits = *last;
    for (int i = 0; i < 8; ++i) {
      auto next = s.Decode(kernels::cpu::Argmax(logits.data(), 1024));
      ASSERT_TRUE(next.ok()) << next.status();
      logits = *next;
      decode_logits.insert(decode_logits.end(), logits.begin(), logits.end());
    }
  };
  std::vector<float> pa, da, pb, db;
  run(**plain, pa, da);
  run(**fused, pb, db);
  ASSERT_EQ(pa.size(), pb.size());
  ASSERT_EQ(da.size(), db.size());
  ASSERT_EQ(da.size(), 8u * 1024u);
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0) << "prompt logits differ";
  EXPECT_EQ(std::memcmp(da.data(), db.data(), da.size() * sizeof(float)), 0) << "decode logits differ";
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memra
