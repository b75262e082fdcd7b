#include "runtime/RankThreads.h"

namespace memra::runtime {

RankThreads::RankThreads(int ranks) : ranks_(ranks < 1 ? 1 : ranks) {
  for (int r = 1; r < ranks_; ++r) threads_.emplace_back([this, r] { Worker(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::Run(const std::function<void(int)>& fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    running_ = ranks_ - 1;
    ++generation_;
  }
  start_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
}

void RankThreads::Worker(int rank) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const std::function<void(int)>* job = job_;
    lock.unlock();
    (*job)(rank);
    lock.lock();
    if (--running_ == 0) done_.notify_one();
  }
}

}  // namespace memra::runtime
