// memra inspect's JSON (gguf::RenderJson) carries typed metadata values, and the file type is
// named as llama.cpp's llama_ftype: a GGUF written here with one key of each kind.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/gguf/ModelSummary.h"
#include "gtest/gtest.h"
#include "llvm/Support/JSON.h"

namespace memra::gguf {
namespace {

// Summary + JSON of an in-memory GGUF with `metadata` (and one tiny tensor).
struct Rendered {
  ModelSummary summary;
  std::string text;  // the JSON as printed
  llvm::json::Value json = nullptr;
  const llvm::json::Object& obj() const { return *json.getAsObject(); }
  const llvm::json::Object& hp() const { return *obj().getObject("hyperparameters"); }
  const llvm::json::Object& general() const { return *obj().getObject("general"); }
};

Rendered Render(const std::vector<std::pair<std::string, Value>>& metadata) {
  GgufWriter w;
  for (const auto& [k, v] : metadata) w.Set(k, v);
  std::vector<uint8_t> data(16, 0);
  EXPECT_TRUE(w.AddTensorBytes("t", GgmlType::kF32, {4}, data).ok());
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto file = GgufFile::FromBytes(*bytes, "test.gguf");
  EXPECT_TRUE(file.ok()) << file.status();
  auto s = Summarize(**file);
  EXPECT_TRUE(s.ok()) << s.status();
  Rendered r;
  r.summary = *s;
  // Through text and back, as a JSON reader sees it.
  std::string text;
  llvm::raw_string_ostream os(text);
  os << RenderJson(*s);
  os.flush();
  auto parsed = llvm::json::parse(text);
  EXPECT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError()) << "\n" << text;
  if (parsed) r.json = std::move(*parsed);
  r.text = text;
  return r;
}

TEST(ModelSummaryJson, TypedValues) {
  std::vector<Value> long_tokens;
  for (int i = 0; i < 1000; ++i) long_tokens.push_back(Value::String("tok"));
  std::vector<Value> nested = {Value::I32Array({1, 2}), Value::I32Array({3})};
  Rendered r = Render({
      {"general.architecture", Value::String("qwen35")},
      {"general.name", Value::String("a \"quoted\"\nname")},
      {"general.file_type", Value::U32(15)},
      {"general.bad_utf8", Value::String("ab\xff")},
      {"qwen35.context_length", Value::U32(4096)},
      {"qwen35.big", Value::U64(std::numeric_limits<uint64_t>::max())},
      {"qwen35.negative", Value::I32(-5)},
      {"qwen35.eps", Value::F32(1e-6f)},
      {"qwen35.f64", Value::F64(0.1)},
      {"qwen35.nan", Value::F32(std::numeric_limits<float>::quiet_NaN())},
      {"qwen35.flag", Value::Bool(true)},
      {"qwen35.sections", Value::I32Array({3, 3, 2, 0})},
      {"qwen35.nested", Value::Array(ValueType::kArray, nested)},
      {"qwen35.tokens", Value::Array(ValueType::kString, long_tokens)},
  });
  const llvm::json::Object& hp = r.hp();
  EXPECT_EQ(hp.getInteger("context_length").getValueOr(-1), 4096);
  // Printed exactly (LLVM 14's parser reads integers past INT64_MAX back as int64, so the text).
  EXPECT_TRUE(absl::StrContains(r.text, "\"big\":18446744073709551615,")) << r.text;
  // In process too: an integer value that fits int64 reads as one.
  EXPECT_EQ(ValueToJson(Value::U64(7)).getAsInteger().getValueOr(-1), 7);
  EXPECT_EQ(hp.getInteger("negative").getValueOr(-1), -5);
  // The f32 1e-6 as the decimal the writer meant, not 9.99999997e-07.
  EXPECT_EQ(hp.getNumber("eps").getValueOr(-1), 1e-6);
  EXPECT_EQ(hp.getNumber("f64").getValueOr(-1), 0.1);
  ASSERT_NE(hp.get("nan"), nullptr);
  EXPECT_EQ(hp.get("nan")->kind(), llvm::json::Value::Null);  // JSON has no NaN
  EXPECT_EQ(hp.getBoolean("flag").getValueOr(false), true);
  const llvm::json::Array* sections = hp.getArray("sections");
  ASSERT_NE(sections, nullptr);
  ASSERT_EQ(sections->size(), 4u);
  EXPECT_EQ((*sections)[0].getAsInteger().getValueOr(-1), 3);
  const llvm::json::Array* n = hp.getArray("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->size(), 2u);
  EXPECT_EQ((*n)[0].getAsArray()->size(), 2u);
  // Longer than kJsonMaxArrayElems: its element type and length.
  const llvm::json::Object* tokens = hp.getObject("tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->getString("elem_type").getValueOr("").str(), std::string("string"));
  EXPECT_EQ(tokens->getInteger("length").getValueOr(-1), 1000);

  // Strings as they are (no quotes added, escapes only JSON's), invalid UTF-8 replaced.
  EXPECT_EQ(r.general().getString("architecture").getValueOr("").str(), std::string("qwen35"));
  EXPECT_EQ(r.general().getString("name").getValueOr("").str(), std::string("a \"quoted\"\nname"));
  EXPECT_EQ(r.obj().getString("name").getValueOr("").str(), std::string("a \"quoted\"\nname"));
  EXPECT_EQ(r.general().getString("bad_utf8"), llvm::StringRef("ab\xef\xbf\xbd"));
  // The file type: named at the top, the id kept in general.
  EXPECT_EQ(r.obj().getString("file_type").getValueOr("").str(), std::string("Q4_K_M"));
  EXPECT_EQ(r.general().getInteger("file_type").getValueOr(-1), 15);

  const std::string text = RenderText(r.summary);
  EXPECT_TRUE(absl::StrContains(text, "file type     Q4_K_M\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "file_type     15 (Q4_K_M)\n")) << text;
}

TEST(ModelSummaryJson, FileTypeAbsentIsNull) {
  Rendered r = Render({{"general.architecture", Value::String("qwen35")}});
  ASSERT_NE(r.obj().get("file_type"), nullptr);
  EXPECT_EQ(r.obj().get("file_type")->kind(), llvm::json::Value::Null);
  EXPECT_TRUE(absl::StrContains(RenderText(r.summary), "file type     (not set)\n"));
}

TEST(ModelSummaryJson, FileTypeNames) {
  EXPECT_EQ(FileTypeName(0), "F32");  // LLAMA_FTYPE_ALL_F32
  EXPECT_EQ(FileTypeName(1), "F16");
  EXPECT_EQ(FileTypeName(7), "Q8_0");
  EXPECT_EQ(FileTypeName(15), "Q4_K_M");
  EXPECT_EQ(FileTypeName(18), "Q6_K");
  EXPECT_EQ(FileTypeName(32), "BF16");
  EXPECT_EQ(FileTypeName(38), "MXFP4_MOE");
  EXPECT_EQ(FileTypeName(1024 + 7), "Q8_0 (guessed)");  // LLAMA_FTYPE_GUESSED
  EXPECT_EQ(FileTypeName(4), "unknown (4)");            // commented out in llama.h
  EXPECT_EQ(FileTypeName(-1), "unknown (-1)");
  EXPECT_EQ(FileTypeName(99), "unknown (99)");
}

}  // namespace
}  // namespace memra::gguf
