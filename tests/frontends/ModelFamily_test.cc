// The model-family registry (frontends/ModelFamily.h): the table, the error for an unknown
// architecture, every family's fixtures lowering through it, and that LowerModel is the family's
// lowering (same module text).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/qwen35/Qwen35Lowering.h"
#include "gtest/gtest.h"
#include "ir/Printer.h"
#include "tests/TestUtil.h"

namespace memra::frontends {
namespace {

using memra::testing::FileExists;
using memra::testing::SharedPath;
using memra::testing::TestDataPath;

const std::string kTiny = TestDataPath("models/qwen35-tiny-f32.gguf");

// A GGUF holding only `general.architecture` (nothing else is read before the family is chosen).
std::unique_ptr<gguf::GgufFile> FileOfArchitecture(const std::string& arch) {
  gguf::GgufWriter w;
  w.Set("general.architecture", gguf::Value::String(arch));
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto f = gguf::GgufFile::FromBytes(*bytes, arch + ".gguf");
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(ModelFamilyTest, TableListsTheSupportedFamilies) {
  EXPECT_EQ(SupportedArchitectures(), (std::vector<std::string>{"qwen35", "qwen35moe", "gemma4", "step35"}));
  const ModelFamily* qwen35 = FindModelFamily("qwen35");
  ASSERT_NE(qwen35, nullptr);
  EXPECT_TRUE(qwen35->supported());
  EXPECT_NE(qwen35->read_hparams, nullptr);
  EXPECT_FALSE(qwen35->description.empty());
  EXPECT_TRUE(FindModelFamily("qwen35moe")->supported());
  EXPECT_TRUE(FindModelFamily("gemma4")->supported());
  EXPECT_TRUE(FindModelFamily("step35")->supported());
  EXPECT_EQ(FindModelFamily("llama"), nullptr);
  for (const ModelFamily& f : ModelFamilies()) EXPECT_EQ(FindModelFamily(f.architecture), &f);
}

TEST(ModelFamilyTest, UnknownArchitectureListsTheSupportedOnes) {
  auto f = FileOfArchitecture("llama");
  ASSERT_NE(f, nullptr);
  auto m = LowerModel(*f);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(m.status().message(),
            "llama.gguf: unsupported architecture 'llama': memra supports qwen35, qwen35moe, gemma4, step35");
  EXPECT_EQ(ReadHparams(*f).status(), m.status());
}

TEST(ModelFamilyTest, Qwen35MoeLowersThroughTheRegistry) {
  const std::string path = TestDataPath("models/qwen35moe-tiny-q8_0.gguf");
  if (!FileExists(path)) GTEST_SKIP() << path << " not found";
  auto f = gguf::GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  auto m = LowerModel(**f);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->attrs().GetString("arch").value_or(""), "qwen35moe");
  auto h = ReadHparams(**f);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->I64Or("n_expert", 0), 8);
  EXPECT_EQ(h->I64Or("n_expert_used", 0), 2);
  // An architecture-only file fails on its first key, naming it (not "not supported").
  auto bare = FileOfArchitecture("qwen35moe");
  ASSERT_NE(bare, nullptr);
  auto e = LowerModel(*bare);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(absl::StrContains(e.status().message(), "qwen35moe.context_length")) << e.status();
}

// Gemma 4's dense, MoE and E-variant fixtures lower, one sequence and a step over several.
TEST(ModelFamilyTest, Gemma4FixturesLower) {
  for (const auto& [file, want] : {std::pair<const char*, const char*>{"gemma4-tiny-f32", ""},
                                   {"gemma4-tiny-q8_0", ""},
                                   {"gemma4moe-tiny-q8_0", ""},
                                   {"gemma4e-tiny-q8_0", ""}}) {
    const std::string path = SharedPath(absl::StrCat("fixtures/models/", file, ".gguf"));
    if (!FileExists(path)) GTEST_SKIP() << path << " not found";
    auto f = gguf::GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    auto m = LowerModel(**f);
    if (std::string(want).empty()) {
      ASSERT_TRUE(m.ok()) << file << ": " << m.status();
      EXPECT_EQ((*m)->attrs().GetString("arch").value_or(""), "gemma4");
    } else {
      ASSERT_FALSE(m.ok()) << file;
      EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented) << m.status();
      EXPECT_TRUE(absl::StrContains(m.status().message(), want)) << m.status();
    }
    frontends::LowerOptions slots;
    slots.slots = 2;
    auto step = LowerModel(**f, slots);
    ASSERT_TRUE(step.ok()) << file << ": " << step.status();
    EXPECT_NE((*step)->function("step"), nullptr);
  }
}

// Step 3.5's fixtures lower, one sequence and a step over several; an architecture-only file
// fails on its first key, naming it.
TEST(ModelFamilyTest, Step35FixturesLower) {
  for (const char* file : {"step35-tiny-f32", "step35-tiny-q8_0"}) {
    const std::string path = SharedPath(absl::StrCat("fixtures/models/", file, ".gguf"));
    if (!FileExists(path)) GTEST_SKIP() << path << " not found";
    auto f = gguf::GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    auto m = LowerModel(**f);
    ASSERT_TRUE(m.ok()) << file << ": " << m.status();
    EXPECT_EQ((*m)->attrs().GetString("arch").value_or(""), "step35");
    frontends::LowerOptions slots;
    slots.slots = 2;
    auto step = LowerModel(**f, slots);
    ASSERT_TRUE(step.ok()) << file << ": " << step.status();
    EXPECT_NE((*step)->function("step"), nullptr);
  }
  auto bare = FileOfArchitecture("step35");
  ASSERT_NE(bare, nullptr);
  auto e = LowerModel(*bare);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(absl::StrContains(e.status().message(), "step35.")) << e.status();
}

// q8_0 KV caches (-ctk / -ctv q8_0) lower for every family, one sequence and a step over several,
// every KV state in the asked type; a head size that q8_0 blocks do not tile is refused before
// any lowering, naming the flag and the size.
TEST(ModelFamilyTest, Q8_0KvCachesLowerForEveryFamily) {
  for (const char* file :
       {"qwen35-tiny-q8_0", "qwen35moe-tiny-q8_0", "gemma4-tiny-q8_0", "gemma4e-tiny-q8_0", "step35-tiny-q8_0"}) {
    SCOPED_TRACE(file);
    const std::string path = SharedPath(absl::StrCat("fixtures/models/", file, ".gguf"));
    if (!FileExists(path)) GTEST_SKIP() << path << " not found";
    auto f = gguf::GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    for (int64_t slots : {0, 2}) {
      frontends::LowerOptions o;
      o.slots = slots;
      o.cache_types = {ir::DType::kQ8_0, ir::DType::kF16};
      auto m = LowerModel(**f, o);
      ASSERT_TRUE(m.ok()) << m.status();
      int k = 0, v = 0;
      for (const auto& st : (*m)->states()) {
        if (st->state_kind() != ir::StateKind::kKv) continue;
        const bool is_k = absl::StrContains(st->name(), "k_cache");
        EXPECT_EQ(st->dtype(), is_k ? ir::DType::kQ8_0 : ir::DType::kF16) << st->name();
        (is_k ? k : v) += 1;
      }
      EXPECT_GT(k, 0);
      EXPECT_EQ(k, v);
    }
  }
  const absl::Status odd = frontends::CheckKvCacheTypes({ir::DType::kF16, ir::DType::kQ8_0}, {64, 48});
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(odd.message(), "--cache-type-v q8_0")) << odd;
  EXPECT_TRUE(absl::StrContains(odd.message(), "head size 48")) << odd;
  EXPECT_TRUE(frontends::CheckKvCacheTypes({ir::DType::kQ8_0, ir::DType::kQ8_0}, {64, 256, 512}).ok());
  EXPECT_FALSE(frontends::CheckKvCacheTypes({ir::DType::kQ4_0, ir::DType::kF32}).ok());
}

TEST(ModelFamilyTest, MissingArchitectureKeyIsNamed) {
  gguf::GgufWriter w;
  w.Set("general.name", gguf::Value::String("nameless"));
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  auto f = gguf::GgufFile::FromBytes(*bytes, "nameless.gguf");
  ASSERT_TRUE(f.ok());
  auto m = LowerModel(**f);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(m.status().message(), "general.architecture")) << m.status();
}

std::string Print(const ir::Module& m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  ir::PrintModule(m, os);
  return os.str();
}

TEST(ModelFamilyTest, LowerModelIsTheFamilysLowering) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto f = gguf::GgufFile::Open(kTiny);
  ASSERT_TRUE(f.ok()) << f.status();
  for (bool all : {false, true}) {
    LowerOptions o;
    o.prefill_all_logits = all;
    o.n_ctx = all ? 128 : 0;
    auto via_registry = LowerModel(**f, o);
    auto direct = LowerQwen35(**f, o);
    ASSERT_TRUE(via_registry.ok()) << via_registry.status();
    ASSERT_TRUE(direct.ok()) << direct.status();
    EXPECT_EQ(Print(**via_registry), Print(**direct));
  }
}

TEST(ModelFamilyTest, HparamsAreTheModuleAttributesLessTheOptions) {
  if (!FileExists(kTiny)) GTEST_SKIP() << kTiny << " not found";
  auto f = gguf::GgufFile::Open(kTiny);
  ASSERT_TRUE(f.ok()) << f.status();
  auto hp = ReadHparams(**f);
  ASSERT_TRUE(hp.ok()) << hp.status();
  auto m = LowerModel(**f);
  ASSERT_TRUE(m.ok()) << m.status();
  ir::AttrDict module_attrs = (*m)->attrs();
  EXPECT_TRUE(module_attrs.Erase("n_ctx"));
  EXPECT_TRUE(module_attrs.Erase("prefill_logits"));
  EXPECT_EQ(module_attrs, *hp) << module_attrs.ToString() << " vs " << hp->ToString();
  EXPECT_EQ(hp->GetString("arch"), "qwen35");
  EXPECT_EQ(hp->I64Or("n_layer", 0), 4);
}

}  // namespace
}  // namespace memra::frontends
