// Feeds mutated versions of every .mir test file to the parser: nothing crashes, and whatever
// parses prints, re-parses and prints identically; whatever verifies survives the first passes
// and still verifies.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

namespace memra::ir {
namespace {

std::vector<std::string> MirFiles() {
  std::vector<std::string> out;
  std::filesystem::path root = std::filesystem::path(MEMRA_SOURCE_DIR) / "tests";
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().extension() == ".mir") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Mutate(const std::string& s, std::mt19937& rng) {
  static const char* kTokens[] = {"%",
                                  "@",
                                  "(",
                                  ")",
                                  "{",
                                  "}",
                                  "[",
                                  "]",
                                  ",",
                                  ":",
                                  "=",
                                  "-",
                                  "*",
                                  "+",
                                  "\"",
                                  "segment",
                                  "return",
                                  "T",
                                  "0",
                                  "-1",
                                  "99999999999999999999",
                                  "1e400",
                                  "nan",
                                  "f32[",
                                  "q4_K",
                                  "\n",
                                  "// -----",
                                  "func @x() {",
                                  "state kv @s : f32[1, 1, 1]"};
  std::string t = s;
  int n = 1 + rng() % 4;
  for (int i = 0; i < n && !t.empty(); ++i) {
    size_t pos = rng() % t.size();
    switch (rng() % 6) {
      case 0:
        t.erase(pos, 1 + rng() % 8);
        break;
      case 1:
        t[pos] = static_cast<char>(rng() % 256);
        break;
      case 2:
        t.insert(pos, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]);
        break;
      case 3:
        t.resize(pos);
        break;
      case 4: {  // duplicate a slice
        size_t len = std::min<size_t>(1 + rng() % 64, t.size() - pos);
        t.insert(rng() % t.size(), t.substr(pos, len));
        break;
      }
      case 5: {  // swap two lines' worth of text
        size_t other = rng() % t.size();
        std::swap(t[pos], t[other]);
        break;
      }
    }
  }
  return t;
}

void CheckOne(const std::string& text, const std::string& what) {
  auto m = ParseModule(text);
  if (!m.ok()) {
    EXPECT_FALSE(m.status().message().empty()) << what;
    return;
  }
  std::string printed = ToText(**m);
  auto again = ParseModule(printed);
  ASSERT_TRUE(again.ok()) << what << ": printed text does not parse: " << again.status() << "\n" << printed;
  ASSERT_EQ(ToText(**again), printed) << what;
  if (!VerifyModule(**m).ok()) return;
  passes::PassManagerOptions opts;
  opts.pipeline = "canonicalize,cse,dce";
  opts.verify_each = true;
  auto pm = passes::PassManager::Create(opts);
  ASSERT_TRUE(pm.ok());
  std::string sink;
  llvm::raw_string_ostream log(sink);
  (*pm)->set_log(&log);
  absl::Status s = (*pm)->Run(**m);
  EXPECT_TRUE(s.ok()) << what << ": " << s << "\n" << printed;
}

TEST(MirParserRobustness, UnmutatedFilesRoundTrip) {
  std::vector<std::string> files = MirFiles();
  ASSERT_FALSE(files.empty());
  for (const std::string& f : files) {
    std::string text = ReadAll(f);
    // Each split chunk on its own, as `memra opt --split-input-file` sees it.
    size_t start = 0;
    while (start <= text.size()) {
      size_t sep = text.find("// -----", start);
      std::string chunk = text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
      CheckOne(chunk, f);
      if (sep == std::string::npos) break;
      start = sep + 8;
    }
  }
}

TEST(MirParserRobustness, MutatedFilesNeverCrash) {
  std::mt19937 rng(12345);
  int parsed = 0, total = 0;
  for (const std::string& f : MirFiles()) {
    std::string text = ReadAll(f);
    for (int i = 0; i < 300; ++i) {
      std::string mutated = Mutate(text, rng);
      ++total;
      CheckOne(mutated, f + " mutation " + std::to_string(i));
      if (ParseModule(mutated).ok()) ++parsed;
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // Some mutations (inside comments, say) keep the text valid; most do not.
  EXPECT_GT(total, 0);
  RecordProperty("parsed", parsed);
}

}  // namespace
}  // namespace memra::ir
