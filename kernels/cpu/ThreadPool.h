// A small fixed-size thread pool for the CPU reference kernels: ParallelFor over index ranges.
//
// The calling thread takes part in the work, so a pool of N threads runs N-1 workers. Work is
// split into contiguous chunks that threads claim dynamically; a kernel's result must not depend
// on how the range is split (every kernel in kernels/cpu computes each output element with the
// same operation order whatever the thread count, so results are bit-identical for any size).
// A ParallelFor issued from inside a ParallelFor body runs serially on the calling thread.
// Concurrent ParallelFor calls on one pool from different threads are serialized.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace memra::kernels::cpu {

class ThreadPool {
 public:
  // num_threads <= 0: DefaultThreadCount().
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads taking part in a ParallelFor (workers + the caller), >= 1.
  int num_threads() const { return num_threads_; }

  // Calls fn(lo, hi) over disjoint subranges covering [begin, end). Each subrange holds at least
  // `grain` indices (except possibly the last). Returns when every call has returned.
  void ParallelFor(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // std::thread::hardware_concurrency() (callers pass an explicit --threads to override)
  // (at least 1).
  static int DefaultThreadCount();

 private:
  void WorkerLoop();
  void RunChunks();

  int num_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serializes ParallelFor callers

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int active_workers_ = 0;  // workers still inside the current job

  // The current job (valid while a ParallelFor is running).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, chunk_ = 1;
  std::atomic_int64_t next_{0};
};

// Runs fn over [begin, end) on `pool`, or serially as one call fn(begin, end) when pool is null.
void ParallelFor(ThreadPool* pool, int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn);

}  // namespace memra::kernels::cpu
