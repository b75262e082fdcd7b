// ir/support/AtomicFile.h: a committed file holds exactly what was written and nothing else is
// left beside it; an uncommitted one leaves nothing; errors name the file.
#include "ir/support/AtomicFile.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace memra {
namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t FilesIn(const std::filesystem::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("atomic-file-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(AtomicFileTest, CommitReplacesTheFileWhole) {
  const std::string path = (dir_ / "out.bin").string();
  { std::ofstream(path) << "old contents"; }
  auto f = AtomicFile::Create(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Write("new ", 4).ok());
  EXPECT_EQ(ReadFile(path), "old contents") << "the old file stays until the commit";
  EXPECT_EQ(FilesIn(dir_), 2u) << "the old file and the temporary";
  ASSERT_TRUE((*f)->Write("bytes", 5).ok());
  ASSERT_TRUE((*f)->Commit().ok());
  EXPECT_EQ(ReadFile(path), "new bytes");
  EXPECT_EQ(FilesIn(dir_), 1u);
  const absl::Status again = (*f)->Commit();
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find("out.bin"), std::string::npos) << again;
  EXPECT_FALSE((*f)->Write("x", 1).ok());
}

TEST_F(AtomicFileTest, UncommittedLeavesNothing) {
  const std::string path = (dir_ / "never.bin").string();
  {
    auto f = AtomicFile::Create(path);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE((*f)->Write("partial", 7).ok());
  }
  EXPECT_EQ(FilesIn(dir_), 0u);
}

// The temporary removed while writing (what LLVM's signal handler does on a SIGINT the process
// inherited as ignored, after which the process goes on): the next write stops with an error
// naming the file, and nothing appears at the path.
TEST_F(AtomicFileTest, ARemovedTemporaryStopsTheWrites) {
  const std::string path = (dir_ / "gone.bin").string();
  auto f = AtomicFile::Create(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Write("first", 5).ok());
  for (const auto& e : std::filesystem::directory_iterator(dir_)) std::filesystem::remove(e.path());
  const absl::Status w = (*f)->Write("second", 6);
  EXPECT_TRUE(absl::IsCancelled(w)) << w;
  EXPECT_NE(w.message().find("gone.bin"), std::string::npos) << w;
  EXPECT_FALSE((*f)->Commit().ok());
  EXPECT_EQ(FilesIn(dir_), 0u);
}

// A FIFO (or a device such as /dev/null) is written in place, not renamed over: the node stays what
// it was and a reader gets the bytes; a directory is refused by name.
TEST_F(AtomicFileTest, FifosAndDevicesAreWrittenInPlace) {
  const std::filesystem::path fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = ReadFile(fifo); });
  {
    auto f = AtomicFile::Create(fifo.string());
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE((*f)->Write("through the pipe", 16).ok());
    ASSERT_TRUE((*f)->Commit().ok());
  }
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_EQ(FilesIn(dir_), 1u);

  auto null = AtomicFile::Create("/dev/null");
  ASSERT_TRUE(null.ok()) << null.status();
  ASSERT_TRUE((*null)->Write("x", 1).ok());
  ASSERT_TRUE((*null)->Commit().ok());
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));

  auto dir = AtomicFile::Create(dir_.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos) << dir.status();
}

// A write larger than the file system's free space is refused before it starts, naming both sizes.
TEST_F(AtomicFileTest, SpaceIsCheckedBeforeALongWrite) {
  auto f = AtomicFile::Create((dir_ / "big.gguf").string());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->CheckSpace(1).ok());
  const absl::Status st = (*f)->CheckSpace(uint64_t{1} << 62);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("big.gguf: the file needs 4611686018.43 GB but its file system has"), std::string::npos)
      << st;
}

TEST_F(AtomicFileTest, AMissingFolderIsNamed) {
  const std::string path = (dir_ / "no-such-folder" / "x.plan").string();
  auto f = AtomicFile::Create(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status();
}

}  // namespace
}  // namespace memra
