// GgufWriter: reader(writer(x)) == x for every value type, nested and string arrays, several
// alignments and tensor types; validation of what the writer refuses.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"
#include "tests/TestUtil.h"

namespace memra::gguf {
namespace {

using memra::testing::FileExists;
using memra::testing::ReadFileBytes;
using memra::testing::TestDataPath;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return out;
}

Value Nested(int depth) {
  if (depth == 1) return Value::StringArray({"leaf", ""});
  return Value::Array(ValueType::kArray, {Nested(depth - 1), Nested(depth - 1)});
}

// Metadata with every value type and edge values.
std::vector<std::pair<std::string, Value>> AllKindsMetadata() {
  std::vector<std::pair<std::string, Value>> kv = {
      {"general.architecture", Value::String("test")},
      {"u8", Value::U8(255)},
      {"i8", Value::I8(-128)},
      {"u16", Value::U16(65535)},
      {"i16", Value::I16(-32768)},
      {"u32", Value::U32(std::numeric_limits<uint32_t>::max())},
      {"i32", Value::I32(std::numeric_limits<int32_t>::min())},
      {"u64", Value::U64(std::numeric_limits<uint64_t>::max())},
      {"i64", Value::I64(std::numeric_limits<int64_t>::min())},
      {"f32", Value::F32(3.14159f)},
      {"f32.nan", Value::F32(std::numeric_limits<float>::quiet_NaN())},
      {"f32.inf", Value::F32(-std::numeric_limits<float>::infinity())},
      {"f32.negzero", Value::F32(-0.0f)},
      {"f32.denorm", Value::F32(std::numeric_limits<float>::denorm_min())},
      {"f64", Value::F64(2.718281828459045)},
      {"f64.max", Value::F64(std::numeric_limits<double>::max())},
      {"bool.true", Value::Bool(true)},
      {"bool.false", Value::Bool(false)},
      {"string", Value::String("h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c")},
      {"string.empty", Value::String("")},
      {"string.nul", Value::String(std::string("a\0b", 3))},
      {"arr.u8", Value::Array(ValueType::kU8, {Value::U8(0), Value::U8(255)})},
      {"arr.i16", Value::Array(ValueType::kI16, {Value::I16(-1), Value::I16(7)})},
      {"arr.u64", Value::Array(ValueType::kU64, {Value::U64(1ull << 63)})},
      {"arr.i64", Value::Array(ValueType::kI64, {Value::I64(-5), Value::I64(5)})},
      {"arr.f64", Value::Array(ValueType::kF64, {Value::F64(-1.25), Value::F64(1e300)})},
      {"arr.bool", Value::Array(ValueType::kBool, {Value::Bool(true), Value::Bool(false)})},
      {"arr.i32", Value::I32Array({3, 3, 2, 0})},
      {"arr.f32", Value::F32Array({0.5f, -0.25f, 1e-6f})},
      {"arr.strings", Value::StringArray({"<unk>", "<s>", "", "\xe2\x96\x81the", std::string(1000, 'x')})},
      {"arr.empty", Value::Array(ValueType::kI32, {})},
      {"arr.empty_strings", Value::Array(ValueType::kString, {})},
      {"arr.nested", Value::Array(ValueType::kArray, {Value::I32Array({1, 2}), Value::I32Array({}),
                                                      Value::Array(ValueType::kArray, {Value::F32Array({9})})})},
      {"arr.nested_deepest", Nested(kMaxArrayDepth)},
  };
  std::vector<std::string> many;
  for (int k = 0; k < 5000; ++k) many.push_back(absl::StrCat("tok", k));
  kv.emplace_back("arr.many_strings", Value::StringArray(many));
  return kv;
}

struct TensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
};

std::vector<TensorSpec> AllKindsTensors() {
  return {
      {"f32.2d", GgmlType::kF32, {3, 5}},
      {"f16.1d", GgmlType::kF16, {7}},
      {"bf16", GgmlType::kBF16, {16, 2}},
      {"q8_0", GgmlType::kQ8_0, {64, 3}},
      {"q4_0", GgmlType::kQ4_0, {32, 1, 2}},
      {"q4_K", GgmlType::kQ4_K, {256, 2}},
      {"q6_K.3d", GgmlType::kQ6_K, {256, 1, 2}},
      {"mxfp4", GgmlType::kMXFP4, {32, 4}},
      {"nvfp4", GgmlType::kNVFP4, {64}},
      {"iq2_xxs", GgmlType::kIQ2_XXS, {256}},
      {"q1_0", GgmlType::kQ1_0, {128, 2}},
      {"i32", GgmlType::kI32, {5}},
      {"empty", GgmlType::kF32, {0, 4}},
      {"f32.4d", GgmlType::kF32, {2, 3, 4, 5}},
      {"scalar", GgmlType::kF32, {}},
      {std::string(kMaxTensorNameBytes, 'n'), GgmlType::kF64, {1}},
  };
}

uint64_t Bytes(const TensorSpec& t) {
  const GgmlTypeTraits& tr = TraitsOf(t.type);
  int64_t n = 1;
  for (int64_t d : t.ne) n *= d;
  return static_cast<uint64_t>(n) / tr.block_elems * tr.block_bytes;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/memra_gguf_", ::getpid(), "_", name);
}

class GgufRoundTripTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufRoundTripTest, ReaderOfWriterIsIdentity) {
  const uint32_t alignment = GetParam();
  GgufWriter w;
  const auto kv = AllKindsMetadata();
  for (const auto& [k, v] : kv) w.Set(k, v);
  ASSERT_TRUE(w.SetAlignment(alignment).ok());
  const auto specs = AllKindsTensors();
  std::vector<std::vector<uint8_t>> data;
  for (size_t k = 0; k < specs.size(); ++k) {
    data.push_back(Pattern(Bytes(specs[k]), static_cast<uint32_t>(k)));
    if (k % 2 == 0) {
      ASSERT_TRUE(w.AddTensorBytes(specs[k].name, specs[k].type, specs[k].ne, data.back()).ok());
    } else {
      // `data` may reallocate while tensors are added: capture it and the index.
      ASSERT_TRUE(w.AddTensor(specs[k].name, specs[k].type, specs[k].ne, [&data, k](absl::Span<uint8_t> out) {
                     if (out.size() != data[k].size()) return absl::InternalError("size mismatch");
                     std::copy(data[k].begin(), data[k].end(), out.begin());
                     return absl::OkStatus();
                   }).ok());
    }
  }
  uint64_t padded_total = 0;
  for (const auto& d : data) padded_total += (d.size() + alignment - 1) / alignment * alignment;
  EXPECT_EQ(w.TotalDataBytes(), padded_total);

  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto f = GgufFile::FromBytes(*bytes, "roundtrip.gguf");
  ASSERT_TRUE(f.ok()) << f.status();

  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->alignment(), alignment);
  EXPECT_EQ((*f)->data_offset() % alignment, 0u);
  EXPECT_EQ((*f)->file_size(), (*f)->data_offset() + padded_total);
  // Metadata: same keys, same order, same values (general.alignment added when not 32).
  auto expected_kv = kv;
  if (alignment != kDefaultAlignment) expected_kv.emplace_back("general.alignment", Value::U32(alignment));
  ASSERT_EQ((*f)->metadata().size(), expected_kv.size());
  for (size_t k = 0; k < expected_kv.size(); ++k) {
    EXPECT_EQ((*f)->metadata()[k].first, expected_kv[k].first);
    EXPECT_EQ((*f)->metadata()[k].second, expected_kv[k].second)
        << expected_kv[k].first << ": " << (*f)->metadata()[k].second.ToString() << " vs "
        << expected_kv[k].second.ToString();
  }
  EXPECT_TRUE(std::isnan(*(*f)->GetF32("f32.nan")));
  EXPECT_EQ(*(*f)->GetU64("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*(*f)->GetI64("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ((*f)->GetStringArray("arr.many_strings")->size(), 5000u);
  // Tensors: same order, names, types, shapes, bytes; data aligned.
  ASSERT_EQ((*f)->tensors().size(), specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    const TensorInfo& t = (*f)->tensors()[k];
    SCOPED_TRACE(specs[k].name);
    EXPECT_EQ(t.name, specs[k].name);
    EXPECT_EQ(t.type, specs[k].type);
    EXPECT_EQ(t.ne, specs[k].ne);
    EXPECT_EQ(t.nbytes, data[k].size());
    EXPECT_EQ(t.offset % alignment, 0u);
    if (t.nbytes) {
      EXPECT_EQ((t.data.data() - (*f)->header_bytes().data()) % alignment, 0);
    }
    EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), data[k].begin(), data[k].end()));
  }

  // Writing to a file produces the same bytes, via path.tmp.
  const std::string path = TempPath(absl::StrCat("rt", alignment, ".gguf"));
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  ASSERT_TRUE(w.Write(path, [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); }).ok());
  EXPECT_FALSE(FileExists(path + ".tmp"));
  auto on_disk = ReadFileBytes(path);
  ASSERT_TRUE(on_disk.ok());
  EXPECT_EQ(*on_disk, *bytes);
  ASSERT_EQ(progress.size(), specs.size());
  EXPECT_EQ(progress.back(), std::make_pair(padded_total, padded_total));
  for (size_t k = 1; k < progress.size(); ++k) EXPECT_GE(progress[k].first, progress[k - 1].first);
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->metadata(), (*f)->metadata());
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufRoundTripTest, ::testing::Values(32u, 64u, 1024u, 1u, 8u),
                         [](const auto& info) { return absl::StrCat("align", info.param); });

// Re-writing a llama.cpp-produced file from what the reader gives back reproduces it byte for byte.
TEST(GgufWriterTest, RewritesFixtureByteIdentical) {
  const std::string path = TestDataPath("models/qwen35-tiny-q8_0.gguf");
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  GgufWriter w;
  for (const auto& [k, v] : (*f)->metadata()) w.Set(k, v);
  for (const TensorInfo& t : (*f)->tensors()) ASSERT_TRUE(w.AddTensorBytes(t.name, t.type, t.ne, t.data).ok());
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto original = ReadFileBytes(path);
  ASSERT_TRUE(original.ok());
  ASSERT_EQ(bytes->size(), original->size());
  EXPECT_TRUE(*bytes == *original);
}

TEST(GgufWriterTest, SetReplacesInPlace) {
  GgufWriter w;
  w.Set("a", Value::U32(1));
  w.Set("b", Value::U32(2));
  w.Set("a", Value::String("x"));
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  auto f = GgufFile::FromBytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->metadata().size(), 2u);
  EXPECT_EQ((*f)->metadata()[0].first, "a");
  EXPECT_EQ((*f)->metadata()[0].second, Value::String("x"));
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufWriterTest, AlignmentKey) {
  GgufWriter w;
  w.Set("general.alignment", Value::U32(256));  // sets the alignment too
  ASSERT_TRUE(w.AddTensorBytes("t", GgmlType::kF32, {1}, Pattern(4, 1)).ok());
  EXPECT_EQ(w.TotalDataBytes(), 256u);
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto f = GgufFile::FromBytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 256u);

  ASSERT_TRUE(w.SetAlignment(32).ok());  // key present: updated, not removed
  bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  f = GgufFile::FromBytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*(*f)->GetU32("general.alignment"), 32u);

  EXPECT_FALSE(w.SetAlignment(0).ok());
  EXPECT_FALSE(w.SetAlignment(48).ok());
  w.Set("general.alignment", Value::U64(64));
  auto bad = w.WriteToBytes();
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "general.alignment")) << bad.status();
  w.Set("general.alignment", Value::U32(48));
  EXPECT_FALSE(w.WriteToBytes().ok());
}

// A fuzzer-found file declared general.alignment = 2^31 (legal GGUF); rewriting it made the writer
// allocate 2 GiB of padding. The writer now refuses alignments above kMaxWriterAlignment.
TEST(GgufWriterTest, RefusesHugeAlignment) {
  GgufWriter w;
  auto s = w.SetAlignment(1u << 31);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "exceeds")) << s;
  EXPECT_TRUE(w.SetAlignment(GgufWriter::kMaxWriterAlignment).ok());
  w.Set("general.alignment", Value::U32(1u << 31));
  EXPECT_FALSE(w.WriteToBytes().ok());
}

TEST(GgufWriterTest, RejectsBadTensors) {
  GgufWriter w;
  auto src = [](absl::Span<uint8_t>) { return absl::OkStatus(); };
  ASSERT_TRUE(w.AddTensor("a", GgmlType::kF32, {4}, src).ok());
  auto dup = w.AddTensor("a", GgmlType::kF32, {4}, src);
  EXPECT_FALSE(dup.ok());
  EXPECT_TRUE(absl::StrContains(dup.message(), "duplicate")) << dup;
  EXPECT_FALSE(w.AddTensor(std::string(64, 'n'), GgmlType::kF32, {4}, src).ok());
  EXPECT_FALSE(w.AddTensor("", GgmlType::kF32, {4}, src).ok());
  EXPECT_FALSE(w.AddTensor("five", GgmlType::kF32, {1, 1, 1, 1, 1}, src).ok());
  EXPECT_FALSE(w.AddTensor("neg", GgmlType::kF32, {4, -1}, src).ok());
  auto block = w.AddTensor("q", GgmlType::kQ8_0, {33}, src);
  EXPECT_FALSE(block.ok());
  EXPECT_TRUE(absl::StrContains(block.message(), "block size 32")) << block;
  EXPECT_FALSE(w.AddTensor("k", GgmlType::kQ4_K, {128, 2}, src).ok());
  EXPECT_FALSE(w.AddTensor("big", GgmlType::kF32, {1ll << 32, 1ll << 32, 1ll << 32}, src).ok());
  EXPECT_FALSE(w.AddTensor("big2", GgmlType::kF32, {1ll << 62}, src).ok());
  EXPECT_FALSE(w.AddTensor("badtype", static_cast<GgmlType>(4), {32}, src).ok());
  EXPECT_FALSE(w.AddTensor("nosrc", GgmlType::kF32, {4}, nullptr).ok());
  auto size = w.AddTensorBytes("sz", GgmlType::kF32, {4}, Pattern(15, 1));
  EXPECT_FALSE(size.ok());
  EXPECT_TRUE(absl::StrContains(size.message(), "needs 16 bytes, got 15")) << size;
  // The rejected tensors left no trace.
  EXPECT_EQ(w.TotalDataBytes(), 32u);
  ASSERT_TRUE(w.AddTensorBytes("sz", GgmlType::kF32, {4}, Pattern(16, 1)).ok());
  EXPECT_EQ(w.TotalDataBytes(), 64u);
}

TEST(GgufWriterTest, RejectsBadValues) {
  struct Case {
    const char* what;
    Value value;
  };
  Value u8_range = Value::U8(0);
  u8_range.u = 300;
  Value i16_range = Value::I16(0);
  i16_range.i = -40000;
  Value mixed = Value::Array(ValueType::kI32, {Value::I32(1), Value::U32(2)});
  Value bad_type;
  bad_type.type = static_cast<ValueType>(13);
  Value bad_elem = Value::Array(static_cast<ValueType>(77), {});
  std::vector<Case> cases = {
      {"u8 value 300 out of range", u8_range},     {"i16 value -40000 out of range", i16_range},
      {"array element 1 has type u32", mixed},     {"invalid value type 13", bad_type},
      {"invalid array element type 77", bad_elem}, {"nested more than 8 levels", Nested(kMaxArrayDepth + 1)}};
  for (const Case& c : cases) {
    GgufWriter w;
    w.Set("key", c.value);
    auto r = w.WriteToBytes();
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.what)) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "'key'")) << r.status();
  }
  GgufWriter w;
  w.Set("", Value::U32(1));
  EXPECT_FALSE(w.WriteToBytes().ok());
}

TEST(GgufWriterTest, SourceErrorLeavesNoFile) {
  const std::string path = TempPath("fail.gguf");
  // An existing file at the destination stays untouched when writing fails.
  {
    FILE* fh = std::fopen(path.c_str(), "wb");
    ASSERT_NE(fh, nullptr);
    std::fputs("old", fh);
    std::fclose(fh);
  }
  GgufWriter w;
  ASSERT_TRUE(w.AddTensorBytes("ok", GgmlType::kF32, {4}, Pattern(16, 1)).ok());
  ASSERT_TRUE(w.AddTensor("bad", GgmlType::kF32, {4}, [](absl::Span<uint8_t>) {
                 return absl::DataLossError("generator exploded");
               }).ok());
  absl::Status s = w.Write(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(), "tensor 'bad': generator exploded")) << s;
  EXPECT_FALSE(FileExists(path + ".tmp"));
  auto old = ReadFileBytes(path);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(std::string(old->begin(), old->end()), "old");
  std::remove(path.c_str());

  absl::Status nodir = w.Write("/nonexistent-dir/x.gguf");
  EXPECT_FALSE(nodir.ok());
  // Refused before anything is written, naming the missing folder.
  EXPECT_TRUE(absl::StrContains(nodir.message(), "the folder /nonexistent-dir does not exist")) << nodir;
  EXPECT_FALSE(w.Write("/").ok());  // a folder is not a file name
}

// Tensors are produced one at a time, each into a buffer of exactly its size.
TEST(GgufWriterTest, StreamsOneTensorAtATime) {
  GgufWriter w;
  std::vector<size_t> sizes;
  for (int k = 0; k < 4; ++k) {
    const int64_t rows = 1024 * (k + 1);
    ASSERT_TRUE(w.AddTensor(absl::StrCat("t", k), GgmlType::kQ8_0, {256, rows}, [&sizes, k](absl::Span<uint8_t> out) {
                   sizes.push_back(out.size());
                   std::fill(out.begin(), out.end(), static_cast<uint8_t>(k + 1));
                   return absl::OkStatus();
                 }).ok());
  }
  const std::string path = TempPath("stream.gguf");
  ASSERT_TRUE(w.Write(path).ok());
  EXPECT_EQ(sizes, (std::vector<size_t>{1024 * 272, 2048 * 272, 3072 * 272, 4096 * 272}));
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  for (int k = 0; k < 4; ++k) {
    const TensorInfo& t = (*f)->tensors()[k];
    EXPECT_EQ(t.nbytes, sizes[k]);
    EXPECT_TRUE(std::all_of(t.data.begin(), t.data.end(), [k](uint8_t b) { return b == k + 1; }));
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memra::gguf
