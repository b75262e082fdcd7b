// GgufFile against the shared fixtures (checked against ../shared/fixtures/manifest.json) and the
// small model copied into tests/data/models.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "llvm/Support/JSON.h"
#include "tests/TestUtil.h"

namespace memra::gguf {
namespace {

using memra::testing::FileExists;
using memra::testing::ReadFileBytes;
using memra::testing::SharedPath;
using memra::testing::TestDataPath;

namespace fs = std::filesystem;

absl::StatusOr<llvm::json::Value> LoadManifest() {
  auto bytes = ReadFileBytes(SharedPath("fixtures/manifest.json"));
  if (!bytes.ok()) return bytes.status();
  llvm::Expected<llvm::json::Value> v =
      llvm::json::parse(llvm::StringRef(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  if (!v) return absl::InvalidArgumentError(llvm::toString(v.takeError()));
  return std::move(*v);
}

std::string Upper(absl::string_view s) { return absl::AsciiStrToUpper(s); }

// Expected ne of the tiny qwen35 / qwen35moe tensors (fixtures README section 2.2), by name with
// any "blk.N." prefix removed.
const std::map<std::string, std::vector<int64_t>>& TinyShapes() {
  static const auto* shapes = new std::map<std::string, std::vector<int64_t>>{
      {"token_embd.weight", {256, 259}},
      {"output_norm.weight", {256}},
      {"output.weight", {256, 259}},
      {"attn_norm.weight", {256}},
      {"post_attention_norm.weight", {256}},
      {"attn_qkv.weight", {256, 256}},
      {"attn_gate.weight", {256, 128}},
      {"ssm_conv1d.weight", {4, 256}},
      {"ssm_dt.bias", {4}},
      {"ssm_a", {4}},
      {"ssm_beta.weight", {256, 4}},
      {"ssm_alpha.weight", {256, 4}},
      {"ssm_norm.weight", {32}},
      {"ssm_out.weight", {128, 256}},
      {"attn_q.weight", {256, 512}},
      {"attn_k.weight", {256, 128}},
      {"attn_v.weight", {256, 128}},
      {"attn_output.weight", {256, 256}},
      {"attn_q_norm.weight", {64}},
      {"attn_k_norm.weight", {64}},
      {"ffn_gate.weight", {256, 512}},
      {"ffn_up.weight", {256, 512}},
      {"ffn_down.weight", {512, 256}},
      {"ffn_gate_inp.weight", {256, 8}},
      {"ffn_gate_exps.weight", {256, 128, 8}},
      {"ffn_up_exps.weight", {256, 128, 8}},
      {"ffn_down_exps.weight", {128, 256, 8}},
      {"ffn_gate_inp_shexp.weight", {256}},
      {"ffn_gate_shexp.weight", {256, 256}},
      {"ffn_up_shexp.weight", {256, 256}},
      {"ffn_down_shexp.weight", {256, 256}},
  };
  return *shapes;
}

std::string StripBlock(const std::string& name) {
  if (!absl::StartsWith(name, "blk.")) return name;
  size_t dot = name.find('.', 4);
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// Structural invariants every successfully parsed file satisfies.
void ExpectConsistent(const GgufFile& f) {
  EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
  uint64_t expected = 0;
  for (const TensorInfo& t : f.tensors()) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.offset, expected);
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_EQ(t.data.size(), t.nbytes);
    if (t.nbytes) {
      EXPECT_EQ(t.data.data(), f.header_bytes().data() + f.data_offset() + t.offset);
      EXPECT_LE(f.data_offset() + t.offset + t.nbytes, f.file_size());
    }
    const GgmlTypeTraits& tr = TraitsOf(t.type);
    EXPECT_EQ(t.nbytes, static_cast<uint64_t>(t.NumElements()) / tr.block_elems * tr.block_bytes);
    EXPECT_EQ(f.FindTensor(t.name), &t);
    expected += (t.nbytes + f.alignment() - 1) / f.alignment() * f.alignment();
  }
  for (const auto& [key, value] : f.metadata()) EXPECT_EQ(f.Find(key), &value);
}

TEST(GgufReaderTest, ModelFixturesMatchManifest) {
  auto manifest = LoadManifest();
  if (!manifest.ok()) GTEST_SKIP() << "no shared fixtures: " << manifest.status();
  const llvm::json::Object* models = manifest->getAsObject()->getObject("models");
  ASSERT_NE(models, nullptr);
  std::map<std::string, const llvm::json::Object*> by_file;
  for (const auto& [name, entry] : *models)
    by_file[std::string(*entry.getAsObject()->getString("file"))] = entry.getAsObject();

  int checked = 0;
  for (const auto& de : fs::directory_iterator(SharedPath("fixtures/models"))) {
    if (de.path().extension() != ".gguf") continue;
    const std::string rel = "models/" + de.path().filename().string();
    SCOPED_TRACE(rel);
    auto it = by_file.find(rel);
    ASSERT_NE(it, by_file.end()) << "file not in manifest";
    const llvm::json::Object& m = *it->second;
    // The qwen35 families' layout (TinyShapes, 4 layers x 256); gemma4 and step35 fixtures are
    // checked by their families' tests.
    if (!absl::StartsWith(std::string(*m.getString("config")), "qwen35")) continue;

    auto f = GgufFile::Open(de.path().string());
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectConsistent(**f);
    EXPECT_EQ((*f)->version(), 3u);
    EXPECT_EQ((*f)->alignment(), 32u);
    EXPECT_EQ((*f)->file_size(), static_cast<uint64_t>(*m.getInteger("bytes")));
    EXPECT_EQ((*f)->tensors().size(), static_cast<size_t>(*m.getInteger("n_tensors")));
    // llama.cpp's n_kv counts its three GGUF.* pseudo keys (version, tensor_count, kv_count).
    EXPECT_EQ((*f)->metadata().size() + 3, static_cast<size_t>(*m.getInteger("n_kv")));

    const std::string config(*m.getString("config"));
    const std::string arch = absl::StartsWith(config, "qwen35moe") ? "qwen35moe" : "qwen35";
    EXPECT_EQ(*(*f)->Architecture(), arch);
    EXPECT_EQ(*(*f)->GetU32(arch + ".block_count"), 4u);
    EXPECT_EQ(*(*f)->GetU32(arch + ".embedding_length"), 256u);
    EXPECT_EQ((*f)->GetStringArray("tokenizer.ggml.tokens")->size(), 259u);

    const llvm::json::Object* by_name = m.getObject("tensor_type_by_name");
    ASSERT_NE(by_name, nullptr);
    EXPECT_EQ(by_name->size(), (*f)->tensors().size());
    for (const auto& [name, type] : *by_name) {
      const TensorInfo* t = (*f)->FindTensor(llvm::StringRef(name).str());
      ASSERT_NE(t, nullptr) << "missing tensor " << llvm::StringRef(name).str();
      EXPECT_EQ(Upper(GgmlTypeName(t->type)), Upper(type.getAsString()->str())) << t->name;
    }
    std::map<std::string, int64_t> counts;
    for (const TensorInfo& t : (*f)->tensors()) {
      counts[Upper(GgmlTypeName(t.type))]++;
      auto shape = TinyShapes().find(StripBlock(t.name));
      ASSERT_NE(shape, TinyShapes().end()) << "unexpected tensor " << t.name;
      EXPECT_EQ(t.ne, shape->second) << t.name;
      std::vector<int64_t> rev(shape->second.rbegin(), shape->second.rend());
      EXPECT_EQ(t.RowMajorShape(), rev) << t.name;
    }
    for (const auto& [type, n] : *m.getObject("tensor_types"))
      EXPECT_EQ(counts[Upper(llvm::StringRef(type).str())], *n.getAsInteger()) << llvm::StringRef(type).str();
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no model fixtures present";
}

TEST(GgufReaderTest, QuantFixturesMatchManifest) {
  auto manifest = LoadManifest();
  if (!manifest.ok()) GTEST_SKIP() << "no shared fixtures: " << manifest.status();
  const llvm::json::Object* types = manifest->getAsObject()->getObject("quant_goldens")->getObject("types");
  ASSERT_NE(types, nullptr);
  std::map<std::string, const llvm::json::Object*> by_file;
  for (const auto& [name, entry] : *types)
    by_file[std::string(*entry.getAsObject()->getString("gguf"))] = entry.getAsObject();

  int checked = 0;
  for (const auto& de : fs::directory_iterator(SharedPath("fixtures/quant"))) {
    if (de.path().extension() != ".gguf") continue;
    const std::string file = de.path().filename().string();
    SCOPED_TRACE(file);
    auto it = by_file.find(file);
    ASSERT_NE(it, by_file.end()) << "file not in manifest";
    const llvm::json::Object& m = *it->second;
    auto f = GgufFile::Open(de.path().string());
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectConsistent(**f);
    EXPECT_EQ(*(*f)->Architecture(), "memra-quant-golden");
    ASSERT_EQ((*f)->tensors().size(), 1u);
    const TensorInfo& t = (*f)->tensors()[0];
    EXPECT_EQ(t.name, "x");
    EXPECT_EQ(static_cast<int64_t>(t.type), *m.getInteger("ggml_type_id"));
    EXPECT_EQ(t.ne, (std::vector<int64_t>{256, 8}));
    EXPECT_EQ(TraitsOf(t.type).block_elems, *m.getInteger("block_elems"));
    EXPECT_EQ(TraitsOf(t.type).block_bytes, *m.getInteger("block_bytes"));
    EXPECT_EQ(t.nbytes, static_cast<uint64_t>(8 * *m.getInteger("row_bytes")));
    auto raw = ReadFileBytes(SharedPath(absl::StrCat("fixtures/quant/", m.getString("raw")->str())));
    ASSERT_TRUE(raw.ok()) << raw.status();
    EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), raw->begin(), raw->end()));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no quant fixtures present";
  EXPECT_EQ(checked, static_cast<int>(types->size()));
}

TEST(GgufReaderTest, VocabOnlyTokenizerFixture) {
  const std::string path = SharedPath("fixtures/tokenizer/qwen3-vocab.gguf");
  if (!FileExists(path)) GTEST_SKIP() << path << " absent";
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectConsistent(**f);
  EXPECT_TRUE((*f)->tensors().empty());
  auto tokens = (*f)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 151936u);
  EXPECT_EQ((*tokens)[0], "!");
  EXPECT_EQ((*f)->GetStringArray("tokenizer.ggml.merges")->size(), 151387u);
  EXPECT_EQ(*(*f)->GetU32("tokenizer.ggml.eos_token_id"), 151645u);
  EXPECT_EQ((*f)->GetIntArray("tokenizer.ggml.token_type")->size(), 151936u);
}

class TinyQ8Test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = GgufFile::Open(TestDataPath("models/qwen35-tiny-q8_0.gguf"));
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
  }
  std::unique_ptr<GgufFile> f_;
};

TEST_F(TinyQ8Test, Header) {
  EXPECT_EQ(f_->version(), 3u);
  EXPECT_EQ(f_->alignment(), 32u);
  EXPECT_EQ(f_->file_size(), 2548032u);
  EXPECT_EQ(f_->data_offset(), 10496u);  // tensor infos end at 10479, padded to 32
  EXPECT_EQ(f_->header_bytes().size(), 10496u);
  EXPECT_EQ(f_->metadata().size(), 33u);
  EXPECT_EQ(f_->tensors().size(), 56u);
  ExpectConsistent(*f_);
  // Metadata keeps file order.
  EXPECT_EQ(f_->metadata()[0].first, "general.architecture");
  EXPECT_EQ(f_->metadata().back().first, "general.file_type");
}

TEST_F(TinyQ8Test, TypedAccessors) {
  EXPECT_EQ(*f_->Architecture(), "qwen35");
  EXPECT_EQ(*f_->GetU32("qwen35.block_count"), 4u);
  EXPECT_EQ(*f_->GetU64("qwen35.context_length"), 4096u);
  EXPECT_EQ(*f_->GetI32("qwen35.attention.head_count_kv"), 2);
  EXPECT_EQ(*f_->GetI64("general.file_type"), 7);
  EXPECT_EQ(*f_->GetF32("qwen35.rope.freq_base"), 1e7f);
  EXPECT_EQ(*f_->GetF32("qwen35.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_TRUE(*f_->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(*f_->GetBool("tokenizer.ggml.add_eos_token"));
  EXPECT_EQ(*f_->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f_->GetIntArray("qwen35.rope.dimension_sections"), (std::vector<int64_t>{3, 3, 2, 0}));
  auto tokens = f_->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 259u);
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[3 + 'A'], "<0x41>");
  auto scores = f_->GetF32Array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ(scores->size(), 259u);
  auto types = f_->GetIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ((*types)[0], 2);
  auto arr = f_->GetArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ((*arr)->elem_type, ValueType::kString);

  // Optional keys.
  EXPECT_EQ(*f_->GetU32Or("qwen35.attention.recurrent_layers", 7), 7u);
  EXPECT_EQ(*f_->GetU32Or("qwen35.block_count", 7), 4u);
  EXPECT_EQ(*f_->GetF32Or("qwen35.rope.scaling.factor", 1.5f), 1.5f);
  EXPECT_TRUE(*f_->GetBoolOr("missing", true));
  EXPECT_EQ(*f_->GetStringOr("general.license", "none"), "none");
  EXPECT_FALSE(f_->GetStringOr("qwen35.block_count", "x").ok());  // present, wrong type
}

TEST_F(TinyQ8Test, AccessorErrors) {
  auto missing = f_->GetU32("qwen35.nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "qwen35-tiny-q8_0.gguf: key 'qwen35.nope' not found"))
      << missing.status();
  auto wrong = f_->GetU32("general.name");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(wrong.status().message(), "key 'general.name' has type string, expected an integer"))
      << wrong.status();
  EXPECT_FALSE(f_->GetString("qwen35.block_count").ok());
  EXPECT_FALSE(f_->GetBool("qwen35.block_count").ok());
  EXPECT_FALSE(f_->GetF32("qwen35.block_count").ok());
  EXPECT_FALSE(f_->GetStringArray("tokenizer.ggml.scores").ok());
  EXPECT_FALSE(f_->GetIntArray("tokenizer.ggml.tokens").ok());
  EXPECT_FALSE(f_->GetF32Array("qwen35.rope.dimension_sections").ok());
  EXPECT_FALSE(f_->GetArray("general.name").ok());
  auto t = f_->GetTensor("blk.9.attn_q.weight");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "tensor 'blk.9.attn_q.weight' not found"));
}

TEST_F(TinyQ8Test, Tensors) {
  auto t = f_->GetTensor("token_embd.weight");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->type, GgmlType::kQ8_0);
  EXPECT_EQ((*t)->ne, (std::vector<int64_t>{256, 259}));
  EXPECT_EQ((*t)->RowMajorShape(), (std::vector<int64_t>{259, 256}));
  EXPECT_EQ((*t)->ne_at(0), 256);
  EXPECT_EQ((*t)->ne_at(1), 259);
  EXPECT_EQ((*t)->ne_at(2), 1);
  EXPECT_EQ((*t)->NumElements(), 256 * 259);
  EXPECT_EQ((*t)->nbytes, 259u * 8 * 34);
  EXPECT_EQ((*t)->offset, 71488u);
  EXPECT_EQ((*t)->data.size(), (*t)->nbytes);
  // llama-quantize reordered the infos: output.weight is first, at data offset 0.
  EXPECT_EQ(f_->tensors()[0].name, "output.weight");
  EXPECT_EQ(f_->tensors()[0].offset, 0u);
  const TensorInfo* norm = f_->FindTensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, GgmlType::kF32);
  EXPECT_EQ(norm->ne, (std::vector<int64_t>{256}));
  // Norm weights are U(0.8, 1.2).
  const float* w = reinterpret_cast<const float*>(norm->data.data());
  for (int k = 0; k < 256; ++k) {
    EXPECT_GE(w[k], 0.8f);
    EXPECT_LE(w[k], 1.2f);
  }
  EXPECT_EQ(f_->FindTensor("nope"), nullptr);
}

TEST_F(TinyQ8Test, FromBytesMatchesOpen) {
  auto bytes = ReadFileBytes(TestDataPath("models/qwen35-tiny-q8_0.gguf"));
  ASSERT_TRUE(bytes.ok());
  auto g = GgufFile::FromBytes(*bytes, "copy.gguf");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->path(), "copy.gguf");
  EXPECT_EQ((*g)->metadata(), f_->metadata());
  ASSERT_EQ((*g)->tensors().size(), f_->tensors().size());
  for (size_t k = 0; k < f_->tensors().size(); ++k) {
    const TensorInfo& a = f_->tensors()[k];
    const TensorInfo& b = (*g)->tensors()[k];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.ne, b.ne);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.info_offset, b.info_offset);
    EXPECT_TRUE(std::equal(a.data.begin(), a.data.end(), b.data.begin(), b.data.end()));
  }
}

TEST(GgufReaderTest, OpenErrors) {
  auto missing = GgufFile::Open(TestDataPath("models/does-not-exist.gguf"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "does-not-exist.gguf")) << missing.status();
  auto dir = GgufFile::Open(TestDataPath("models"));
  EXPECT_FALSE(dir.ok());
  EXPECT_TRUE(absl::StrContains(dir.status().message(), "not a regular file")) << dir.status();
}

TEST(GgufValueTest, ToStringAndEquality) {
  EXPECT_EQ(Value::U32(7).ToString(), "7");
  EXPECT_EQ(Value::I8(-3).ToString(), "-3");
  EXPECT_EQ(Value::Bool(true).ToString(), "true");
  EXPECT_EQ(Value::F32(1.5f).ToString(), "1.5");
  EXPECT_EQ(Value::String("a\"b\n").ToString(), "\"a\\\"b\\n\"");
  EXPECT_EQ(Value::I32Array({1, 2, 3}).ToString(), "i32[3] [1, 2, 3]");
  EXPECT_EQ(Value::I32Array({1, 2, 3, 4}).ToString(2), "i32[4] [1, 2, ...]");
  EXPECT_EQ(Value::StringArray({"x"}).ToString(), "string[1] [\"x\"]");
  EXPECT_EQ(ValueTypeName(ValueType::kF64), "f64");
  EXPECT_TRUE(Value::U32(1).IsInteger());
  EXPECT_FALSE(Value::Bool(true).IsInteger());
  EXPECT_FALSE(Value::F32(1).IsInteger());
  EXPECT_EQ(Value::U32(1), Value::U32(1));
  EXPECT_NE(Value::U32(1), Value::U64(1));
  EXPECT_NE(Value::U32(1), Value::U32(2));
  EXPECT_EQ(Value::F32(NAN), Value::F32(NAN));
  EXPECT_NE(Value::F64(0.0), Value::F64(-0.0));
  EXPECT_EQ(Value::F32Array({1, 2}), Value::F32Array({1, 2}));
  EXPECT_NE(Value::F32Array({1, 2}), Value::F32Array({1}));
  EXPECT_NE(Value::Array(ValueType::kI32, {}), Value::Array(ValueType::kU32, {}));
}

}  // namespace
}  // namespace memra::gguf
