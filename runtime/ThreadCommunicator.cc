#include "runtime/ThreadCommunicator.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"

namespace memra::runtime {

class ThreadRank : public Communicator {
 public:
  ThreadRank(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  absl::Status AllReduceSum(float* data, int64_t n) override {
    MEMRA_RETURN_IF_ERROR(Publish(data, n, "all_reduce"));
    // Every rank forms the whole sum in rank order, so all of them hold the same bits.
    std::vector<float> sum(static_cast<size_t>(n));
    std::memcpy(sum.data(), group_->in_[0], static_cast<size_t>(n) * sizeof(float));
    for (int r = 1; r < group_->size(); ++r) {
      const float* x = group_->in_[r];
      for (int64_t i = 0; i < n; ++i) sum[i] += x[i];
    }
    // Nobody overwrites its operand before every rank has read it.
    if (!group_->Arrive()) return Aborted("all_reduce");
    std::memcpy(data, sum.data(), static_cast<size_t>(n) * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status AllGather(const float* in, int64_t n, float* out) override {
    MEMRA_RETURN_IF_ERROR(Publish(in, n, "all_gather"));
    for (int r = 0; r < group_->size(); ++r)
      std::memcpy(out + r * n, group_->in_[r], static_cast<size_t>(n) * sizeof(float));
    if (!group_->Arrive()) return Aborted("all_gather");
    return absl::OkStatus();
  }

 private:
  absl::Status Publish(const float* data, int64_t n, const char* what) {
    {
      std::lock_guard<std::mutex> lock(group_->mu_);
      group_->in_[rank_] = data;
      group_->n_[rank_] = n;
    }
    if (!group_->Arrive()) return Aborted(what);
    for (int r = 0; r < group_->size(); ++r)
      if (group_->n_[r] != n) {
        const std::string why = absl::StrCat(what, ": rank ", rank_, " has ", n, " elements, rank ", r, " has ",
                                             group_->n_[r], " (the ranks run different programs)");
        group_->Abort(why);
        return absl::FailedPreconditionError(why);
      }
    return absl::OkStatus();
  }

  absl::Status Aborted(const char* what) {
    std::lock_guard<std::mutex> lock(group_->mu_);
    return absl::AbortedError(
        absl::StrCat(what, " on rank ", rank_, ": the group was aborted (", group_->abort_reason_, ")"));
  }

  ThreadGroup* group_;
  int rank_;
};

ThreadGroup::ThreadGroup(int size) : size_(size), in_(size, nullptr), n_(size, 0) {
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<ThreadRank>(this, r));
}

void ThreadGroup::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) abort_reason_ = why;
  aborted_ = true;
  cv_.notify_all();
}

void ThreadGroup::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = false;
  abort_reason_.clear();
  arrived_ = 0;
}

bool ThreadGroup::Arrive() {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) return false;
  const uint64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return true;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  return generation_ != gen;
}

}  // namespace memra::runtime
