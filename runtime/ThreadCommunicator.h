// Ranks as threads of one process: ThreadGroup(N) hands out N Communicators that meet at a
// barrier in every collective. The sum is formed in rank order (x_0 + x_1 + ...), in f32, by every
// rank alike, so every rank receives bit-identical results and a run is reproducible. Used to run
// a module partitioned by shard-tensor-parallel on the CPU executor, one executor a thread
// (tests/runtime/TensorParallelCpu_test.cc), against the unsplit module.
//
// A rank that fails stops calling collectives; the others would wait for it forever, so the
// failing side calls ThreadGroup::Abort(), which makes every waiting and later collective return
// an error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/Communicator.h"

namespace memra::runtime {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size);
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;
  int size() const { return size_; }
  // Rank r's communicator (owned by the group).
  Communicator* rank(int r) const { return ranks_[r].get(); }
  void Abort(const std::string& why);
  // Makes an aborted group usable again. Only when no rank is inside a collective (between calls).
  void Reset();

 private:
  friend class ThreadRank;
  // Waits until every rank arrived (one generation); false if the group was aborted.
  bool Arrive();

  const int size_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
  // Each rank's operand of the collective in progress.
  std::vector<const float*> in_;
  std::vector<int64_t> n_;
};

}  // namespace memra::runtime
