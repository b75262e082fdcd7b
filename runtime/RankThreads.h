// One thread per tensor-parallel rank for the life of an executor (runtime/TensorParallelExecutor.h):
// Run(fn) calls fn(r) for every rank at once, rank 0 on the calling thread and rank r > 0 on its
// own worker, and returns when all have returned. Persistent workers keep a rank on one thread
// (a CUDA rank's context stays current there) and spare every call a thread start and join,
// which a decode step of a few hundred microseconds would otherwise pay per rank.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace memra::runtime {

class RankThreads {
 public:
  explicit RankThreads(int ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;
  int size() const { return ranks_; }
  // fn(r) for r in [0, size()) at once; one call at a time (callers serialize).
  void Run(const std::function<void(int)>& fn);

 private:
  void Worker(int rank);

  const int ranks_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;  // one per Run
  int running_ = 0;          // workers still inside the current job
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace memra::runtime
