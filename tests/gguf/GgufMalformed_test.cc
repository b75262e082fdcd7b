// Hostile input: the malformed corpus in tests/data/gguf_malformed (expected messages in its
// README.md), the valid fuzz seeds, and deterministic mutations (byte flips, truncations) of valid
// files, which must give a status (ok or error) and never crash.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"
#include "tests/TestUtil.h"

namespace memra::gguf {
namespace {

using memra::testing::ReadFileBytes;
using memra::testing::TestDataPath;

namespace fs = std::filesystem;

// `| `file.gguf` | `substring` | ... |` rows of the corpus README.
std::map<std::string, std::string> ReadExpectations() {
  std::ifstream in(TestDataPath("gguf_malformed/README.md"));
  std::map<std::string, std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "| `")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 4) continue;
    auto unquote = [](std::string s) {
      size_t a = s.find('`'), b = s.rfind('`');
      return a == std::string::npos || a == b ? std::string() : s.substr(a + 1, b - a - 1);
    };
    out[unquote(cells[1])] = unquote(cells[2]);
  }
  return out;
}

// Uses everything a parsed file exposes, so that sanitizers see any bad span or value.
uint64_t Touch(const GgufFile& f) {
  uint64_t h = f.version() + f.alignment() + f.data_offset();
  for (uint8_t b : f.header_bytes()) h = h * 31 + b;
  for (const auto& [key, value] : f.metadata()) {
    h += value.ToString().size() + key.size();
    (void)f.GetU32(key);
    (void)f.GetF32(key);
    (void)f.GetStringArray(key);
    (void)f.GetIntArray(key);
  }
  for (const TensorInfo& t : f.tensors()) {
    h += t.NumElements() + t.RowMajorShape().size();
    for (uint8_t b : t.data) h += b;
  }
  return h;
}

TEST(GgufMalformedTest, CorpusGivesExpectedErrors) {
  const auto expectations = ReadExpectations();
  ASSERT_GE(expectations.size(), 40u) << "README.md table not found or too short";
  std::vector<std::string> files;
  for (const auto& de : fs::directory_iterator(TestDataPath("gguf_malformed")))
    if (de.path().extension() == ".gguf") files.push_back(de.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files.size(), expectations.size()) << "every corpus file needs a README row and vice versa";
  for (const std::string& name : files) {
    SCOPED_TRACE(name);
    auto it = expectations.find(name);
    ASSERT_NE(it, expectations.end()) << "no README.md row";
    ASSERT_FALSE(it->second.empty());
    const std::string path = TestDataPath("gguf_malformed/" + name);
    auto f = GgufFile::Open(path);
    ASSERT_FALSE(f.ok()) << "parsed a malformed file";
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
    EXPECT_TRUE(absl::StartsWith(f.status().message(), path + ": ")) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), it->second))
        << "message: " << f.status().message() << "\nexpected to contain: " << it->second;
    // Same verdict from an in-memory copy.
    auto bytes = ReadFileBytes(path);
    ASSERT_TRUE(bytes.ok());
    auto g = GgufFile::FromBytes(*bytes, name);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().message(), absl::StrCat(name, f.status().message().substr(path.size())));
  }
}

TEST(GgufMalformedTest, FuzzSeedsAreValid) {
  int n = 0;
  for (const auto& de : fs::directory_iterator(fs::path(MEMRA_SOURCE_DIR) / "tests/fuzz/seeds")) {
    SCOPED_TRACE(de.path().string());
    auto f = GgufFile::Open(de.path().string());
    ASSERT_TRUE(f.ok()) << f.status();
    Touch(**f);
    ++n;
  }
  EXPECT_GE(n, 4);
}

TEST(GgufMalformedTest, SeedAllKindsContents) {
  auto f = GgufFile::Open(std::string(MEMRA_SOURCE_DIR) + "/tests/fuzz/seeds/valid_all_kinds.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ(*(*f)->GetU32("t.u32"), 4000000000u);
  EXPECT_EQ(*(*f)->GetI32("t.i32"), -2000000000);
  EXPECT_FALSE((*f)->GetI32("t.u32").ok());  // does not fit
  EXPECT_EQ(*(*f)->GetU64("t.u64"), 1ull << 63);
  EXPECT_FALSE((*f)->GetI64("t.u64").ok());
  EXPECT_EQ(*(*f)->GetI64("t.i64"), -(1ll << 62));
  EXPECT_EQ(*(*f)->GetF32("t.f64"), -2.25f);
  EXPECT_EQ(*(*f)->GetStringArray("t.strings"), (std::vector<std::string>{"a", "", "ccc"}));
  auto nested = (*f)->GetArray("t.nested");
  ASSERT_TRUE(nested.ok());
  const Value* v = *nested;
  int depth = 1;
  while (v->elem_type == ValueType::kArray) {
    ASSERT_EQ(v->array.size(), 1u);
    v = &v->array[0];
    ++depth;
  }
  EXPECT_EQ(depth, kMaxArrayDepth);
  EXPECT_EQ(v->array[0], Value::U8(7));
  const TensorInfo* empty = (*f)->FindTensor("w.empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->nbytes, 0u);
  EXPECT_TRUE(empty->data.empty());
  EXPECT_EQ((*f)->FindTensor("w.q4_0")->offset, 192u);
}

// A small valid file with every value kind and several tensor types.
std::vector<uint8_t> SmallValidFile() {
  GgufWriter w;
  w.Set("general.architecture", Value::String("mut"));
  w.Set("u8", Value::U8(1));
  w.Set("i16", Value::I16(-2));
  w.Set("u32", Value::U32(3));
  w.Set("f32", Value::F32(0.5f));
  w.Set("bool", Value::Bool(true));
  w.Set("u64", Value::U64(5));
  w.Set("f64", Value::F64(6));
  w.Set("strs", Value::StringArray({"ab", "c"}));
  w.Set("nest", Value::Array(ValueType::kArray, {Value::I32Array({1}), Value::I32Array({})}));
  (void)w.SetAlignment(64);
  std::vector<uint8_t> d(256, 0x5a);
  (void)w.AddTensorBytes("a", GgmlType::kF32, {4, 2}, absl::MakeSpan(d).subspan(0, 32));
  (void)w.AddTensorBytes("q", GgmlType::kQ8_0, {32, 2}, absl::MakeSpan(d).subspan(0, 68));
  (void)w.AddTensorBytes("z", GgmlType::kF16, {0}, {});
  (void)w.AddTensorBytes("h", GgmlType::kBF16, {3}, absl::MakeSpan(d).subspan(0, 6));
  return *w.WriteToBytes();
}

TEST(GgufMutationTest, FlipEveryByteOfSmallFile) {
  const std::vector<uint8_t> base = SmallValidFile();
  ASSERT_TRUE(GgufFile::FromBytes(base).ok());
  int ok = 0, bad = 0;
  std::vector<uint8_t> buf = base;
  for (size_t pos = 0; pos < base.size(); ++pos) {
    for (int mode = 0; mode < 6; ++mode) {
      static constexpr uint8_t kXor[] = {0x01, 0x80, 0xFF, 0x10};
      buf[pos] = mode < 4 ? base[pos] ^ kXor[mode] : (mode == 4 ? 0x00 : 0x7F);
      auto f = GgufFile::FromBytes(buf, "mut");
      if (f.ok()) {
        Touch(**f);
        ++ok;
      } else {
        EXPECT_FALSE(f.status().message().empty());
        ++bad;
      }
    }
    buf[pos] = base[pos];
  }
  EXPECT_GT(bad, 0);
  EXPECT_GT(ok, 0);  // flips inside tensor data or padding are harmless
}

TEST(GgufMutationTest, TruncateSmallFileEverywhere) {
  const std::vector<uint8_t> base = SmallValidFile();
  for (size_t len = 0; len < base.size(); ++len) {
    auto f = GgufFile::FromBytes(absl::MakeConstSpan(base).subspan(0, len), "trunc");
    // Only the trailing padding of the last tensor may be cut without an error.
    if (f.ok()) {
      EXPECT_GE(len, base.size() - 64) << len;
      Touch(**f);
    }
  }
}

// Multi-byte corruption: overwrite every aligned 8-byte field of the header with extreme values.
TEST(GgufMutationTest, ExtremeWordsInHeader) {
  const std::vector<uint8_t> base = SmallValidFile();
  auto parsed = GgufFile::FromBytes(base);
  ASSERT_TRUE(parsed.ok());
  const size_t header = (*parsed)->data_offset();
  const uint64_t words[] = {
      0, 1, 0x7FFFFFFFFFFFFFFFull, 0x8000000000000000ull, ~0ull, 0xFFFFFFFFull, 0x100000000ull, 9, 13, 64};
  std::vector<uint8_t> buf = base;
  for (size_t pos = 0; pos + 8 <= header; ++pos) {
    for (uint64_t w : words) {
      std::memcpy(buf.data() + pos, &w, 8);
      auto f = GgufFile::FromBytes(buf, "words");
      if (f.ok()) Touch(**f);
      std::memcpy(buf.data() + pos, base.data() + pos, 8);
    }
  }
}

TEST(GgufMutationTest, FixtureHeaderFlipsAndTruncations) {
  auto full = ReadFileBytes(TestDataPath("models/qwen35-tiny-q8_0.gguf"));
  ASSERT_TRUE(full.ok()) << full.status();
  auto parsed = GgufFile::FromBytes(*full);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const size_t header = (*parsed)->data_offset();
  // Every truncation up to the data section is an error.
  for (size_t len = 0; len <= header + 64; ++len) {
    auto f = GgufFile::FromBytes(absl::MakeConstSpan(*full).subspan(0, len), "trunc");
    ASSERT_FALSE(f.ok()) << len;
  }
  // Flip every header byte (on a copy cut shortly after the data section starts, so each parse
  // stays cheap: the parse still covers the whole header before checking the data extents).
  std::vector<uint8_t> buf(full->begin(), full->begin() + header + 4096);
  for (size_t pos = 0; pos < header; ++pos) {
    for (uint8_t x : {0x01, 0xFF}) {
      buf[pos] ^= x;
      auto f = GgufFile::FromBytes(buf, "flip");
      if (f.ok()) Touch(**f);
      buf[pos] ^= x;
    }
  }
}

}  // namespace
}  // namespace memra::gguf
