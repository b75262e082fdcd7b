// runtime/RankThreads.h: every call runs fn once per rank, all at once (the ranks meet inside fn,
// as tensor-parallel ranks meet in a collective), rank 0 on the caller's thread and each other rank
// always on the same worker of its own; calls return only when every rank has returned.
#include "runtime/RankThreads.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ThreadCommunicator.h"

namespace memra::runtime {
namespace {

TEST(RankThreads, EveryRankRunsOnceOnItsOwnThreadEveryCall) {
  constexpr int kRanks = 4, kCalls = 200;
  RankThreads threads(kRanks);
  EXPECT_EQ(threads.size(), kRanks);
  std::vector<std::thread::id> first(kRanks);
  std::vector<int> runs(kRanks, 0);
  for (int call = 0; call < kCalls; ++call) {
    std::vector<std::thread::id> seen(kRanks);
    threads.Run([&](int r) {
      seen[r] = std::this_thread::get_id();
      ++runs[r];  // one writer per rank
    });
    // Run returned: every rank's writes are visible and done.
    if (call == 0) first = seen;
    EXPECT_EQ(seen, first) << "call " << call;
  }
  EXPECT_EQ(first[0], std::this_thread::get_id());
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(runs[r], kCalls) << "rank " << r;
}

// The ranks run at once: a collective every rank must reach completes inside one call.
TEST(RankThreads, RanksMeetInsideOneCall) {
  constexpr int kRanks = 3;
  RankThreads threads(kRanks);
  ThreadGroup group(kRanks);
  for (int call = 0; call < 50; ++call) {
    std::vector<std::vector<float>> x(kRanks);
    std::atomic<int> failed{0};
    threads.Run([&](int r) {
      x[r] = {static_cast<float>(r + call)};
      failed += !group.rank(r)->AllReduceSum(x[r].data(), 1).ok();
    });
    EXPECT_EQ(failed.load(), 0);
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(x[r][0], static_cast<float>(3 * call + 3)) << "call " << call;
  }
}

TEST(RankThreads, OneRankRunsOnTheCaller) {
  RankThreads threads(1);
  std::thread::id id;
  threads.Run([&](int r) {
    EXPECT_EQ(r, 0);
    id = std::this_thread::get_id();
  });
  EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace memra::runtime
