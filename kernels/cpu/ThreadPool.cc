#include "kernels/cpu/ThreadPool.h"

#include <algorithm>
#include <cstdlib>

namespace memra::kernels::cpu {
namespace {
thread_local bool tls_inside_parallel_for = false;
}  // namespace

int ThreadPool::DefaultThreadCount() {
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

ThreadPool::ThreadPool(int num_threads) {
  num_threads_ = num_threads > 0 ? num_threads : DefaultThreadCount();
  workers_.reserve(num_threads_ - 1);
  for (int i = 0; i + 1 < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  for (;;) {
    int64_t lo = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (lo >= end_) break;
    int64_t hi = std::min(end_, lo + chunk_);
    (*fn_)(lo, hi);
  }
}

void ThreadPool::WorkerLoop() {
  tls_inside_parallel_for = true;  // nested ParallelFor inside a body runs serially
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunChunks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--active_workers_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t begin, int64_t end, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n = end - begin;
  if (num_threads_ == 1 || n <= grain || tls_inside_parallel_for) {
    fn(begin, end);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  // About 4 chunks per thread for load balance, never smaller than the grain.
  int64_t chunk = std::max<int64_t>(grain, (n + 4 * num_threads_ - 1) / (4 * num_threads_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    begin_ = begin;
    end_ = end;
    chunk_ = chunk;
    next_.store(begin, std::memory_order_relaxed);
    active_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  tls_inside_parallel_for = true;
  RunChunks();
  tls_inside_parallel_for = false;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return active_workers_ == 0; });
  fn_ = nullptr;
}

void ParallelFor(ThreadPool* pool, int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  if (pool == nullptr) {
    fn(begin, end);
    return;
  }
  pool->ParallelFor(begin, end, grain, fn);
}

}  // namespace memra::kernels::cpu
