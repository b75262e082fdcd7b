#include "tests/TestUtil.h"

#include <sys/stat.h>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"

namespace memra::testing {

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

}  // namespace memra::testing
