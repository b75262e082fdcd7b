#include "kernels/cpu/ThreadPool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace memra::kernels::cpu {
namespace {

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 7, 100, 1000}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n + 10));
        pool.ParallelFor(5, 5 + n, grain, [&](int64_t lo, int64_t hi) {
          EXPECT_LE(lo, hi);
          for (int64_t i = lo; i < hi; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n + 10; ++i)
          EXPECT_EQ(hits[i].load(), (i >= 5 && i < 5 + n) ? 1 : 0) << threads << " " << n << " " << i;
      }
    }
  }
}

TEST(ThreadPoolTest, UsesSeveralThreadsAndIsReusable) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 200; ++rep) {
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(0, 10000, 1, [&](int64_t lo, int64_t hi) {
      int64_t s = 0;
      for (int64_t i = lo; i < hi; ++i) s += i;
      sum += s;
    });
    ASSERT_EQ(sum.load(), 10000LL * 9999 / 2);
  }
}

TEST(ThreadPoolTest, NestedParallelForRunsSerially) {
  ThreadPool pool(3);
  std::atomic<int64_t> count{0};
  pool.ParallelFor(0, 16, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) pool.ParallelFor(0, 10, 1, [&](int64_t a, int64_t b) { count += b - a; });
  });
  EXPECT_EQ(count.load(), 160);
}

TEST(ThreadPoolTest, NullPoolRunsOneCall) {
  int calls = 0;
  ParallelFor(nullptr, 0, 100, 1, [&](int64_t lo, int64_t hi) {
    ++calls;
    EXPECT_EQ(lo, 0);
    EXPECT_EQ(hi, 100);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, DefaultThreadCountPositive) { EXPECT_GE(ThreadPool::DefaultThreadCount(), 1); }

}  // namespace
}  // namespace memra::kernels::cpu
