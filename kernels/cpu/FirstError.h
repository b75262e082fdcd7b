// The first error any thread-pool worker raised (kernels/cpu: matmul, MoE): workers call Set,
// check failed() to stop early, and the caller returns status() after the pool has joined.
#pragma once

#include <atomic>
#include <mutex>

#include "absl/status/status.h"

namespace memra::kernels::cpu {

class FirstError {
 public:
  void Set(absl::Status st) {
    if (st.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = std::move(st);
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  absl::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  absl::Status status_;
  std::atomic<bool> failed_{false};
};

}  // namespace memra::kernels::cpu
