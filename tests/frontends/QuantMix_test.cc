// memra gen's tensor-type mixes against llama-quantize: the tables below are what llama.cpp b10573's
// llama-quantize (commit 3f545bec, CPU build) wrote for memra gen's bf16 files: the tiny preset
// quantized for real (`llama-quantize qwen35-tiny-bf16.gguf out.gguf Q4_K_M`), the 9b preset with
// --dry-run (same decisions, no data). The iq4 tables come from a later llama.cpp checkout's
// llama-quantize (same rules for these types) on tiny (real) and 0.8b (--dry-run). Each table lists
// the tensors whose type is not the mix's base type; every other 2-D matrix has the base type and
// every 1-D tensor and ssm_conv1d stays f32. Also: memra's quantizers rebuild the shared fixture's
// llama-quantize files byte for byte.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontends/gguf/GgufFile.h"
#include "frontends/synthetic/QuantMix.h"
#include "frontends/synthetic/Qwen35Synthetic.h"
#include "gtest/gtest.h"
#include "kernels/formats/Quant.h"
#include "tests/TestUtil.h"

namespace memra {
namespace {

using formats::GgmlType;
using Table = std::map<std::string, GgmlType>;

struct MixCase {
  const char* preset;
  const char* dtype;
  uint32_t file_type;
  GgmlType base;
  Table exceptions;
  int n_f32;
};

// IQ4_XS and IQ4_NL on 0.8b (n_gqa 4, tied embedding; llama-quantize --dry-run on memra gen's bf16
// file): every attn_v-like matrix (attn_qkv of the DeltaNet layers too) in q5_K, ffn_down of the
// first n_layer / 8 = 3 layers in q5_K, the tied token_embd in q6_K.
const Table kIQ4Exceptions08b = {
    {"token_embd.weight", GgmlType::kQ6_K},      {"blk.0.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.0.ffn_down.weight", GgmlType::kQ5_K},  {"blk.1.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.1.ffn_down.weight", GgmlType::kQ5_K},  {"blk.2.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.2.ffn_down.weight", GgmlType::kQ5_K},  {"blk.3.attn_v.weight", GgmlType::kQ5_K},
    {"blk.4.attn_qkv.weight", GgmlType::kQ5_K},  {"blk.5.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.6.attn_qkv.weight", GgmlType::kQ5_K},  {"blk.7.attn_v.weight", GgmlType::kQ5_K},
    {"blk.8.attn_qkv.weight", GgmlType::kQ5_K},  {"blk.9.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.10.attn_qkv.weight", GgmlType::kQ5_K}, {"blk.11.attn_v.weight", GgmlType::kQ5_K},
    {"blk.12.attn_qkv.weight", GgmlType::kQ5_K}, {"blk.13.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.14.attn_qkv.weight", GgmlType::kQ5_K}, {"blk.15.attn_v.weight", GgmlType::kQ5_K},
    {"blk.16.attn_qkv.weight", GgmlType::kQ5_K}, {"blk.17.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.18.attn_qkv.weight", GgmlType::kQ5_K}, {"blk.19.attn_v.weight", GgmlType::kQ5_K},
    {"blk.20.attn_qkv.weight", GgmlType::kQ5_K}, {"blk.21.attn_qkv.weight", GgmlType::kQ5_K},
    {"blk.22.attn_qkv.weight", GgmlType::kQ5_K}, {"blk.23.attn_v.weight", GgmlType::kQ5_K},
};

// tiny: 56 tensors, 23 f32. 0.8b: 320 tensors, 133 f32. 9b: 427 tensors, 177 f32.
const MixCase kCases[] = {
    {"tiny",
     "q4_k_m",
     15,
     GgmlType::kQ4_K,
     {
         {"blk.0.ssm_out.weight", GgmlType::kQ5_0},
         {"output.weight", GgmlType::kQ6_K},
         {"blk.1.ssm_out.weight", GgmlType::kQ5_0},
         {"blk.2.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.2.ffn_down.weight", GgmlType::kQ6_K},
         {"blk.2.ssm_out.weight", GgmlType::kQ5_0},
         {"blk.3.attn_v.weight", GgmlType::kQ6_K},
         {"blk.3.ffn_down.weight", GgmlType::kQ6_K},
     },
     23},
    {"tiny",
     "q5_k_m",
     17,
     GgmlType::kQ5_K,
     {
         {"blk.0.ssm_out.weight", GgmlType::kQ5_1},
         {"output.weight", GgmlType::kQ6_K},
         {"blk.1.ssm_out.weight", GgmlType::kQ5_1},
         {"blk.2.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.2.ffn_down.weight", GgmlType::kQ6_K},
         {"blk.2.ssm_out.weight", GgmlType::kQ5_1},
         {"blk.3.attn_v.weight", GgmlType::kQ6_K},
         {"blk.3.ffn_down.weight", GgmlType::kQ6_K},
     },
     23},
    {"tiny",
     "q6_k",
     18,
     GgmlType::kQ6_K,
     {
         {"blk.0.ssm_out.weight", GgmlType::kQ8_0},
         {"blk.1.ssm_out.weight", GgmlType::kQ8_0},
         {"blk.2.ssm_out.weight", GgmlType::kQ8_0},
     },
     23},
    {"9b",
     "q4_k_m",
     15,
     GgmlType::kQ4_K,
     {
         {"blk.0.attn_qkv.weight", GgmlType::kQ6_K},  {"blk.0.ffn_down.weight", GgmlType::kQ6_K},
         {"output.weight", GgmlType::kQ6_K},          {"blk.1.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.1.ffn_down.weight", GgmlType::kQ6_K},  {"blk.2.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.2.ffn_down.weight", GgmlType::kQ6_K},  {"blk.3.attn_v.weight", GgmlType::kQ6_K},
         {"blk.3.ffn_down.weight", GgmlType::kQ6_K},  {"blk.6.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.6.ffn_down.weight", GgmlType::kQ6_K},  {"blk.9.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.9.ffn_down.weight", GgmlType::kQ6_K},  {"blk.12.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.12.ffn_down.weight", GgmlType::kQ6_K}, {"blk.15.attn_v.weight", GgmlType::kQ6_K},
         {"blk.15.ffn_down.weight", GgmlType::kQ6_K}, {"blk.18.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.18.ffn_down.weight", GgmlType::kQ6_K}, {"blk.21.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.21.ffn_down.weight", GgmlType::kQ6_K}, {"blk.24.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.24.ffn_down.weight", GgmlType::kQ6_K}, {"blk.27.attn_v.weight", GgmlType::kQ6_K},
         {"blk.27.ffn_down.weight", GgmlType::kQ6_K}, {"blk.28.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.28.ffn_down.weight", GgmlType::kQ6_K}, {"blk.29.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.29.ffn_down.weight", GgmlType::kQ6_K}, {"blk.30.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.30.ffn_down.weight", GgmlType::kQ6_K}, {"blk.31.attn_v.weight", GgmlType::kQ6_K},
         {"blk.31.ffn_down.weight", GgmlType::kQ6_K},
     },
     177},
    {"9b",
     "q5_k_m",
     17,
     GgmlType::kQ5_K,
     {
         {"blk.0.attn_qkv.weight", GgmlType::kQ6_K},  {"blk.0.ffn_down.weight", GgmlType::kQ6_K},
         {"output.weight", GgmlType::kQ6_K},          {"blk.1.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.1.ffn_down.weight", GgmlType::kQ6_K},  {"blk.2.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.2.ffn_down.weight", GgmlType::kQ6_K},  {"blk.3.attn_v.weight", GgmlType::kQ6_K},
         {"blk.3.ffn_down.weight", GgmlType::kQ6_K},  {"blk.6.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.6.ffn_down.weight", GgmlType::kQ6_K},  {"blk.9.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.9.ffn_down.weight", GgmlType::kQ6_K},  {"blk.12.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.12.ffn_down.weight", GgmlType::kQ6_K}, {"blk.15.attn_v.weight", GgmlType::kQ6_K},
         {"blk.15.ffn_down.weight", GgmlType::kQ6_K}, {"blk.18.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.18.ffn_down.weight", GgmlType::kQ6_K}, {"blk.21.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.21.ffn_down.weight", GgmlType::kQ6_K}, {"blk.24.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.24.ffn_down.weight", GgmlType::kQ6_K}, {"blk.27.attn_v.weight", GgmlType::kQ6_K},
         {"blk.27.ffn_down.weight", GgmlType::kQ6_K}, {"blk.28.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.28.ffn_down.weight", GgmlType::kQ6_K}, {"blk.29.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.29.ffn_down.weight", GgmlType::kQ6_K}, {"blk.30.attn_qkv.weight", GgmlType::kQ6_K},
         {"blk.30.ffn_down.weight", GgmlType::kQ6_K}, {"blk.31.attn_v.weight", GgmlType::kQ6_K},
         {"blk.31.ffn_down.weight", GgmlType::kQ6_K},
     },
     177},
    {"9b", "q6_k", 18, GgmlType::kQ6_K, {}, 177},  // llama-quantize: 250 x q6_K, nothing else
    // IQ4_XS: ssm_out rows (128 on tiny) are not 256-multiples, so they fall back to iq4_nl.
    {"tiny",
     "iq4_xs",
     30,
     GgmlType::kIQ4_XS,
     {
         {"output.weight", GgmlType::kQ6_K},
         {"blk.0.ssm_out.weight", GgmlType::kIQ4_NL},
         {"blk.1.ssm_out.weight", GgmlType::kIQ4_NL},
         {"blk.2.ssm_out.weight", GgmlType::kIQ4_NL},
     },
     23},
    {"tiny", "iq4_nl", 25, GgmlType::kIQ4_NL, {{"output.weight", GgmlType::kQ6_K}}, 23},
    {"0.8b", "iq4_xs", 30, GgmlType::kIQ4_XS, kIQ4Exceptions08b, 133},
    {"0.8b", "iq4_nl", 25, GgmlType::kIQ4_NL, kIQ4Exceptions08b, 133},
};

bool StaysF32(const synthetic::SyntheticTensorType& t) {
  return t.ne.size() == 1 || t.name.find("ssm_conv1d") != std::string::npos;
}

class MixTable : public ::testing::TestWithParam<MixCase> {};

TEST_P(MixTable, MatchesLlamaQuantize) {
  const MixCase& c = GetParam();
  auto shape = synthetic::Qwen35Preset(c.preset);
  ASSERT_TRUE(shape.ok());
  auto types = synthetic::Qwen35TensorTypes(*shape, c.dtype);
  ASSERT_TRUE(types.ok()) << types.status();
  auto mix = synthetic::LookupQuantMix(c.dtype);
  ASSERT_TRUE(mix.ok());
  EXPECT_EQ(mix->file_type, c.file_type);
  int n_f32 = 0;
  std::set<std::string> seen;
  for (const auto& t : *types) {
    GgmlType want = StaysF32(t) ? GgmlType::kF32 : c.base;
    if (auto it = c.exceptions.find(t.name); it != c.exceptions.end()) {
      want = it->second;
      seen.insert(t.name);
    }
    n_f32 += t.type == GgmlType::kF32;
    EXPECT_EQ(formats::GgmlTypeName(t.type), formats::GgmlTypeName(want))
        << c.preset << " " << c.dtype << " " << t.name;
  }
  EXPECT_EQ(seen.size(), c.exceptions.size()) << "a table entry names no tensor";
  EXPECT_EQ(n_f32, c.n_f32);
}

INSTANTIATE_TEST_SUITE_P(Qwen35, MixTable, ::testing::ValuesIn(kCases), [](const auto& info) {
  std::string n = std::string(info.param.preset) + "_" + info.param.dtype;
  for (char& ch : n)
    if (ch == '.') ch = '_';
  return n;
});

// llama-quantize's rules for the simple mixes on tiny (from the same runs): q4_0 and q8_0 keep every
// matrix in the base type except output.weight (q6_K for q4_0), mxfp4_moe puts a dense model in
// q8_0 throughout, mxfp4 (--pure MXFP4_MOE) every matrix in mxfp4.
TEST(MixTable, TinySimpleMixes) {
  auto shape = synthetic::Qwen35Preset("tiny");
  ASSERT_TRUE(shape.ok());
  struct Simple {
    const char* dtype;
    GgmlType base, output;
  };
  for (const Simple& s :
       {Simple{"q4_0", GgmlType::kQ4_0, GgmlType::kQ6_K}, Simple{"q8_0", GgmlType::kQ8_0, GgmlType::kQ8_0},
        Simple{"mxfp4_moe", GgmlType::kQ8_0, GgmlType::kQ8_0}, Simple{"mxfp4", GgmlType::kMXFP4, GgmlType::kMXFP4},
        Simple{"bf16", GgmlType::kBF16, GgmlType::kBF16}}) {
    auto types = synthetic::Qwen35TensorTypes(*shape, s.dtype);
    ASSERT_TRUE(types.ok()) << types.status();
    for (const auto& t : *types) {
      const GgmlType want = StaysF32(t) ? GgmlType::kF32 : t.name == "output.weight" ? s.output : s.base;
      EXPECT_EQ(formats::GgmlTypeName(t.type), formats::GgmlTypeName(want)) << s.dtype << " " << t.name;
    }
  }
}

// A tied model (no output.weight): token_embd gets the output's rule (q6_K in q4_k_m).
TEST(MixTable, TiedEmbeddingIsQuantizedLikeTheOutput) {
  auto shape = synthetic::Qwen35Preset("0.8b");
  ASSERT_TRUE(shape.ok());
  ASSERT_TRUE(shape->tied_output);
  auto types = synthetic::Qwen35TensorTypes(*shape, "q4_k_m");
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->front().name, "token_embd.weight");
  EXPECT_EQ(types->front().type, GgmlType::kQ6_K);
}

// tensor_type_fallback alone: rows a K-quant's 256 does not divide.
TEST(MixTable, FallbackTypes) {
  EXPECT_EQ(*synthetic::FallbackType(GgmlType::kQ4_K, 704), GgmlType::kQ5_0);   // Gemma 4 26B-A4B's expert downs
  EXPECT_EQ(*synthetic::FallbackType(GgmlType::kQ6_K, 2112), GgmlType::kQ8_0);  // its shared down
  EXPECT_EQ(*synthetic::FallbackType(GgmlType::kQ5_K, 704), GgmlType::kQ5_1);
  EXPECT_EQ(*synthetic::FallbackType(GgmlType::kQ3_K, 704), GgmlType::kQ4_0);
  EXPECT_EQ(*synthetic::FallbackType(GgmlType::kQ4_K, 1280), GgmlType::kQ4_K);  // a multiple: kept
  EXPECT_EQ(*synthetic::FallbackType(GgmlType::kQ4_K, 100), GgmlType::kF16);    // 100 % 32 != 0 either
  auto none = synthetic::FallbackType(GgmlType::kQ8_0, 100);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(std::string(none.status().message()).find("no fallback"), std::string::npos) << none.status();
}

TEST(MixTable, UnknownDtype) {
  auto mix = synthetic::LookupQuantMix("q4_k_x");
  ASSERT_FALSE(mix.ok());
  EXPECT_NE(mix.status().message().find("iq4_xs"), std::string::npos) << mix.status();  // the known names
}

// memra gen writes iq4_xs / iq4_nl files with the mix's types whose blocks are what formats::Quantize
// makes of the bf16 file of the same seed. (llama-quantize IQ4_XS / IQ4_NL on that bf16 file wrote
// the same bytes for all 56 tensors of both files; compared with gguf-py when this was written.)
TEST(MixTable, WritesIQ4Files) {
  auto shape = synthetic::Qwen35Preset("tiny");
  ASSERT_TRUE(shape.ok());
  for (const char* dtype : {"iq4_xs", "iq4_nl"}) {
    SCOPED_TRACE(dtype);
    synthetic::SyntheticOptions opt;
    opt.dtype = dtype;
    opt.seed = 5;
    opt.progress = false;
    const std::string path = testing::UniqueTempPath(std::string(dtype) + ".gguf");
    auto stats = synthetic::WriteSyntheticQwen35(*shape, opt, path);
    ASSERT_TRUE(stats.ok()) << stats.status();
    synthetic::SyntheticOptions bf16_opt = opt;
    bf16_opt.dtype = "bf16";
    const std::string bf16_path = testing::UniqueTempPath(std::string(dtype) + "-bf16.gguf");
    ASSERT_TRUE(synthetic::WriteSyntheticQwen35(*shape, bf16_opt, bf16_path).ok());
    auto f = gguf::GgufFile::Open(path);
    auto src = gguf::GgufFile::Open(bf16_path);
    ASSERT_TRUE(f.ok() && src.ok());
    auto types = synthetic::Qwen35TensorTypes(*shape, dtype);
    ASSERT_TRUE(types.ok());
    int n_iq4 = 0;
    for (const auto& want : *types) {
      const gguf::TensorInfo* t = (*f)->FindTensor(want.name);
      const gguf::TensorInfo* s = (*src)->FindTensor(want.name);
      ASSERT_TRUE(t != nullptr && s != nullptr) << want.name;
      ASSERT_EQ(formats::GgmlTypeName(t->type), formats::GgmlTypeName(want.type)) << want.name;
      if (t->type != GgmlType::kIQ4_XS && t->type != GgmlType::kIQ4_NL) continue;
      ++n_iq4;
      std::vector<float> x(s->NumElements());
      ASSERT_TRUE(formats::Dequantize(s->type, s->data, absl::MakeSpan(x)).ok());
      std::vector<uint8_t> q(t->data.size());
      ASSERT_TRUE(formats::Quantize(t->type, x, absl::MakeSpan(q)).ok());
      EXPECT_TRUE(std::equal(q.begin(), q.end(), t->data.begin(), t->data.end())) << want.name;
    }
    EXPECT_EQ(n_iq4, 32);
  }
}

// The shared fixture's quantized models were made by llama-quantize from its f32 model: the mix
// names each tensor's type, and memra's quantizer rebuilds every tensor's bytes exactly.
class FixtureMix : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureMix, RebuildsTheLlamaQuantizeFileByteForByte) {
  const std::string src_path = testing::SharedPath("fixtures/models/qwen35-tiny-f32.gguf");
  const std::string ref_path = testing::SharedPath(std::string("fixtures/models/qwen35-tiny-") + GetParam() + ".gguf");
  if (!testing::FileExists(src_path) || !testing::FileExists(ref_path)) GTEST_SKIP() << "fixtures missing";
  auto src = gguf::GgufFile::Open(src_path);
  auto ref = gguf::GgufFile::Open(ref_path);
  ASSERT_TRUE(src.ok() && ref.ok());
  auto mix = synthetic::LookupQuantMix(GetParam());
  ASSERT_TRUE(mix.ok());
  auto file_type = (*ref)->GetU32("general.file_type");
  ASSERT_TRUE(file_type.ok());
  EXPECT_EQ(*file_type, mix->file_type);
  std::vector<synthetic::MixTensor> in;
  for (const auto& t : (*src)->tensors()) in.push_back({t.name, t.ne, t.type});
  synthetic::MixModel model;
  model.n_layer = 4;
  model.n_gqa = 2;
  auto types = synthetic::AssignMixTypes(*mix, model, in);
  ASSERT_TRUE(types.ok()) << types.status();
  int n_quantized = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const gguf::TensorInfo* s = (*src)->FindTensor(in[i].name);
    const gguf::TensorInfo* r = (*ref)->FindTensor(in[i].name);
    ASSERT_NE(r, nullptr) << in[i].name;
    ASSERT_EQ(formats::GgmlTypeName((*types)[i]), formats::GgmlTypeName(r->type)) << in[i].name;
    if (r->type == GgmlType::kF32) continue;
    std::vector<float> x(s->NumElements());
    ASSERT_TRUE(formats::Dequantize(s->type, s->data, absl::MakeSpan(x)).ok());
    std::vector<uint8_t> q(r->data.size());
    ASSERT_TRUE(formats::Quantize(r->type, x, absl::MakeSpan(q)).ok()) << in[i].name;
    EXPECT_TRUE(std::equal(q.begin(), q.end(), r->data.begin()))
        << in[i].name << " (" << formats::GgmlTypeName(r->type) << ") differs from llama-quantize's bytes";
    ++n_quantized;
  }
  EXPECT_EQ(n_quantized, 33);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureMix, ::testing::Values("q4_k_m", "q6_k", "q4_0", "q8_0", "f16", "bf16"),
                         [](const auto& info) { return std::string(info.param); });

// The MoE fixture: qwen35moe-tiny-q8_0 is llama-quantize's Q8_0 of qwen35moe-tiny-f32 (8 experts:
// the 8-expert rules apply); the mix with n_expert = 8 names every tensor's type, 3-D experts
// included, and the quantizer rebuilds their bytes.
TEST(MixTable, MoeFixtureMatchesLlamaQuantize) {
  const std::string src_path = testing::SharedPath("fixtures/models/qwen35moe-tiny-f32.gguf");
  std::string ref_path = testing::TestDataPath("models/qwen35moe-tiny-q8_0.gguf");
  if (!testing::FileExists(src_path) || !testing::FileExists(ref_path)) GTEST_SKIP() << "MoE fixtures missing";
  auto src = gguf::GgufFile::Open(src_path);
  auto ref = gguf::GgufFile::Open(ref_path);
  ASSERT_TRUE(src.ok() && ref.ok());
  auto mix = synthetic::LookupQuantMix("q8_0");
  ASSERT_TRUE(mix.ok());
  std::vector<synthetic::MixTensor> in;
  for (const auto& t : (*src)->tensors()) in.push_back({t.name, t.ne, t.type});
  synthetic::MixModel model;
  model.n_layer = 4;
  model.n_gqa = 2;
  model.n_expert = 8;
  auto types = synthetic::AssignMixTypes(*mix, model, in);
  ASSERT_TRUE(types.ok()) << types.status();
  int n_q8 = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const gguf::TensorInfo* s = (*src)->FindTensor(in[i].name);
    const gguf::TensorInfo* r = (*ref)->FindTensor(in[i].name);
    ASSERT_NE(r, nullptr) << in[i].name;
    ASSERT_EQ(formats::GgmlTypeName((*types)[i]), formats::GgmlTypeName(r->type)) << in[i].name;
    if (r->type == GgmlType::kF32) continue;
    std::vector<float> x(s->NumElements());
    ASSERT_TRUE(formats::Dequantize(s->type, s->data, absl::MakeSpan(x)).ok());
    std::vector<uint8_t> q(r->data.size());
    ASSERT_TRUE(formats::Quantize(r->type, x, absl::MakeSpan(q)).ok()) << in[i].name;
    EXPECT_TRUE(std::equal(q.begin(), q.end(), r->data.begin())) << in[i].name;
    ++n_q8;
  }
  EXPECT_EQ(n_q8, 45);
  // q4_k_m with 8 experts: attn_v / attn_k / attn_qkv bumped to q8_0, attn_output to q5_K.
  auto q4 = synthetic::LookupQuantMix("q4_k_m");
  ASSERT_TRUE(q4.ok());
  auto t4 = synthetic::AssignMixTypes(*q4, model, in);
  ASSERT_TRUE(t4.ok()) << t4.status();
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& n = in[i].name;
    if (n == "blk.3.attn_v.weight" || n == "blk.3.attn_k.weight" || n == "blk.0.attn_qkv.weight")
      EXPECT_EQ(formats::GgmlTypeName((*t4)[i]), "q8_0") << n;
    if (n == "blk.3.attn_output.weight") EXPECT_EQ(formats::GgmlTypeName((*t4)[i]), "q5_K") << n;
    if (n == "blk.1.ffn_gate_exps.weight") EXPECT_EQ(formats::GgmlTypeName((*t4)[i]), "q4_K") << n;
  }
}

}  // namespace
}  // namespace memra
