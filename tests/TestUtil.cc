#include "tests/TestUtil.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "codegen/SelectKernelsPass.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "passes/PassManager.h"
#include "tests/JsonLite.h"

namespace memra::testing {

absl::Status CompileModule(ir::Module& m, absl::string_view pipeline) {
  codegen::RegisterCodegenPasses();
  passes::PassManagerOptions o;
  o.pipeline = std::string(pipeline);
  o.verify_each = true;
  auto pm = passes::PassManager::Create(o);
  if (!pm.ok()) return pm.status();
  return (*pm)->Run(m);
}

std::string UniqueTempPath(const std::string& name) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? absl::StrCat(info->test_suite_name(), ".", info->name()) : "global";
  // Parameterized names carry '/'.
  std::replace(test.begin(), test.end(), '/', '_');
  return absl::StrCat(::testing::TempDir(), "/", test, "-", name);
}

absl::StatusOr<std::vector<int32_t>> ReadGreedyTokens(const std::string& json_path) {
  auto json = ReadJsonFile(json_path);
  if (!json.ok()) return json.status();
  std::vector<int32_t> out;
  for (const auto& v : (*json)["greedy_tokens"].array()) out.push_back(static_cast<int32_t>(v.int_value()));
  return out;
}

std::string TestDataPath(const std::string& rel) { return absl::StrCat(MEMRA_TEST_DATA_DIR, "/", rel); }
std::string SharedPath(const std::string& rel) { return absl::StrCat(MEMRA_SHARED_DIR, "/", rel); }

std::string MemraBinary() {
  const char* env = std::getenv("MEMRA_BIN");  // set by ctest; the build dir's memra otherwise
  return env ? env : "memra";
}

const std::vector<int32_t> kFixturePrompt = {1,   87,  107, 104, 35,  116, 120, 108, 102, 110, 35,  101,
                                             117, 114, 122, 113, 35,  105, 114, 123, 35,  109, 120, 112,
                                             115, 118, 35,  114, 121, 104, 117, 35,  119, 107, 104, 35,
                                             111, 100, 125, 124, 35,  103, 114, 106, 49,  35,  52,  53};

std::vector<float> RandomNormal(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes;
}

template <typename T>
static absl::StatusOr<std::vector<T>> ReadArray(const std::string& path) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() % sizeof(T) != 0)
    return absl::DataLossError(absl::StrCat(path, ": size ", bytes->size(), " is not a multiple of ", sizeof(T)));
  std::vector<T> out(bytes->size() / sizeof(T));
  std::memcpy(out.data(), bytes->data(), bytes->size());
  return out;
}

absl::StatusOr<std::vector<float>> ReadF32File(const std::string& path) { return ReadArray<float>(path); }
absl::StatusOr<std::vector<int32_t>> ReadI32File(const std::string& path) { return ReadArray<int32_t>(path); }

absl::Status WriteWithNanRow(const std::string& src, const std::string& tensor, int64_t row, const std::string& dst) {
  auto bytes = ReadFileBytes(src);
  if (!bytes.ok()) return bytes.status();
  auto file = gguf::GgufFile::FromBytes(*bytes, src);
  if (!file.ok()) return file.status();
  auto t = (*file)->GetTensor(tensor);
  if (!t.ok()) return t.status();
  const int64_t cols = (*t)->ne_at(0);
  if ((*t)->ne.size() != 2 || row < 0 || row >= (*t)->ne_at(1))
    return absl::InvalidArgumentError(absl::StrCat(tensor, ": no row ", row));
  uint8_t* base = bytes->data() + (*file)->data_offset() + (*t)->offset;
  if ((*t)->type == formats::GgmlType::kF32) {
    const float nan = std::nanf("");
    for (int64_t c = 0; c < cols; ++c) std::memcpy(base + (row * cols + c) * 4, &nan, 4);
  } else if ((*t)->type == formats::GgmlType::kQ8_0) {
    const uint16_t f16_nan = 0x7e00;  // a block: f16 scale, 32 int8
    for (int64_t b = 0; b < cols / 32; ++b) std::memcpy(base + (row * (cols / 32) + b) * 34, &f16_nan, 2);
  } else {
    return absl::UnimplementedError(absl::StrCat(tensor, ": only f32 and q8_0 rows can be made NaN"));
  }
  std::ofstream out(dst, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", dst));
  return absl::OkStatus();
}

int64_t FirstFreshToken(const std::vector<int32_t>& tokens) {
  for (size_t j = 2; j + 1 < tokens.size(); ++j)
    if (std::find(kFixturePrompt.begin(), kFixturePrompt.end(), tokens[j]) == kFixturePrompt.end() &&
        std::find(tokens.begin(), tokens.begin() + j, tokens[j]) == tokens.begin() + j)
      return static_cast<int64_t>(j);
  return -1;
}

int CountOpsOfKind(const ir::Module& m, ir::OpKind kind) {
  int n = 0;
  for (const auto& f : m.functions())
    for (const ir::Op* op : f->Ops()) n += op->is(kind);
  return n;
}

bool SameBytes(const runtime::HostTensor& a, const runtime::HostTensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace memra::testing
