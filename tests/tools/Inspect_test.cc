// memra inspect's summary on every shared fixture, checked against fixtures/manifest.json.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/ModelSummary.h"
#include "gtest/gtest.h"
#include "llvm/Support/JSON.h"
#include "tests/TestUtil.h"

namespace memra {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(InspectTest, EveryFixtureMatchesManifest) {
  const std::string manifest_path = testing::SharedPath("fixtures/manifest.json");
  if (!testing::FileExists(manifest_path)) GTEST_SKIP() << "no ../shared/fixtures beside the checkout";
  auto manifest = llvm::json::parse(ReadText(manifest_path));
  ASSERT_TRUE(bool(manifest)) << llvm::toString(manifest.takeError());
  const llvm::json::Object* models = manifest->getAsObject()->getObject("models");
  ASSERT_NE(models, nullptr);
  int checked = 0;
  for (const auto& [name, entry] : *models) {
    const llvm::json::Object* m = entry.getAsObject();
    // qwen35 / qwen35moe hyperparameters below; gemma4 and step35 are checked by their families.
    if (!m->getString("file") || !m->getString("config") || !m->getString("config")->startswith("qwen35")) continue;
    std::string path = testing::SharedPath("fixtures/" + m->getString("file")->str());
    if (!testing::FileExists(path)) continue;  // e.g. the MoE f32 master is not shipped
    SCOPED_TRACE(path);
    auto file = gguf::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto s = gguf::Summarize(**file);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->file_size, *m->getInteger("bytes"));
    EXPECT_EQ(int64_t(s->tensors.size()), *m->getInteger("n_tensors"));
    // The manifest counts gguf-py's reader fields, which add GGUF.version, GGUF.tensor_count and
    // GGUF.kv_count to the file's key/value pairs.
    EXPECT_EQ(int64_t(s->n_metadata) + 3, *m->getInteger("n_kv"));
    EXPECT_EQ(s->architecture, name.str().find("moe") != std::string::npos ? "qwen35moe" : "qwen35");
    // Per-type counts and every tensor's type.
    for (const auto& [type, count] : *m->getObject("tensor_types")) {
      auto it = std::find_if(s->by_type.begin(), s->by_type.end(),
                             [&](const auto& kv) { return llvm::StringRef(kv.first).equals_insensitive(type); });
      ASSERT_NE(it, s->by_type.end()) << "type " << type.str() << " missing";
      EXPECT_EQ(int64_t(it->second.first), *count.getAsInteger()) << type.str();
    }
    const llvm::json::Object* by_name = m->getObject("tensor_type_by_name");
    ASSERT_NE(by_name, nullptr);
    for (const auto& t : s->tensors) {
      auto expected = by_name->getString(t.name);
      ASSERT_TRUE(expected.hasValue()) << t.name;
      EXPECT_EQ(llvm::StringRef(std::string(formats::GgmlTypeName(t.type))).lower(), expected->lower()) << t.name;
    }
    // Hyperparameters against the generator config.
    const std::string arch = s->architecture;
    auto cfg =
        llvm::json::parse(ReadText(testing::SharedPath("fixtures/configs/" + m->getString("config")->str() + ".json")));
    ASSERT_TRUE(bool(cfg));
    const llvm::json::Object* c = cfg->getAsObject();
    EXPECT_EQ(*(*file)->GetU32(arch + ".embedding_length"), *c->getInteger("n_embd"));
    EXPECT_EQ(*(*file)->GetU32(arch + ".block_count"), *c->getInteger("n_layer"));
    EXPECT_EQ(*(*file)->GetU32(arch + ".attention.head_count"), *c->getInteger("n_head"));
    EXPECT_EQ(*(*file)->GetU32(arch + ".attention.head_count_kv"), *c->getInteger("n_head_kv"));
    EXPECT_EQ(*(*file)->GetU32(arch + ".ssm.inner_size"), *c->getInteger("ssm_d_inner"));
    EXPECT_EQ(s->tokenizer.model, "llama");
    EXPECT_EQ(s->tokenizer.vocab_size, 259u);
    EXPECT_EQ(s->tokenizer.token_type_counts["byte"], 256u);
    // The JSON rendering carries the same numbers.
    llvm::json::Value j = gguf::RenderJson(*s);
    EXPECT_EQ(*j.getAsObject()->getInteger("n_tensors"), *m->getInteger("n_tensors"));
    std::string text = gguf::RenderText(*s);
    EXPECT_NE(text.find("blk.0.attn_qkv.weight"), std::string::npos);
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace memra
