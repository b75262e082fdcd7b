#include "runtime/TensorParallelExecutor.h"

#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/StatusMacros.h"
#include "kernels/cpu/ThreadPool.h"

namespace memra::runtime {
namespace {

class TensorParallelExecutor final : public Executor {
 public:
  TensorParallelExecutor(Backend backend, int tp) : backend_(backend), group_(tp) {}

  absl::Status Init(const ir::Module& module, const gguf::GgufFile& file, const ExecutorOptions& options) {
    const int tp = group_.size();
    ranks_.resize(tp);
    return OnEveryRank([&](int r) -> absl::Status {
      ExecutorOptions o = options;
      // The machine's threads shared among the ranks.
      const int threads = o.cpu.threads > 0 ? o.cpu.threads : kernels::cpu::ThreadPool::DefaultThreadCount();
      o.cpu.threads = std::max(1, threads / tp);
      o.cpu.communicator = group_.rank(r);
      MEMRA_ASSIGN_OR_RETURN(ranks_[r], CreateExecutor(backend_, module, file, o));
      return absl::OkStatus();
    });
  }

  Backend backend() const override { return backend_; }

  absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args) override {
    std::vector<std::vector<HostTensor>> out(ranks_.size());
    MEMRA_RETURN_IF_ERROR(OnEveryRank([&](int r) -> absl::Status {
      std::vector<HostTensor> mine;
      for (const HostTensor& a : args) mine.push_back(a.Clone());
      MEMRA_ASSIGN_OR_RETURN(out[r], ranks_[r]->Run(name, std::move(mine)));
      return absl::OkStatus();
    }));
    return std::move(out[0]);
  }
  absl::Status ResetState() override {
    return OnEveryRank([&](int r) { return ranks_[r]->ResetState(); });
  }
  // Offsets are in the module's (local) state types, the same on every rank.
  absl::Status WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes) override {
    return OnEveryRank([&](int r) { return ranks_[r]->WriteState(name, offset, data, bytes); });
  }
  absl::Status AllocateStash(int64_t bytes) override {
    return OnEveryRank([&](int r) { return ranks_[r]->AllocateStash(bytes); });
  }
  absl::Status CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                         bool to_stash) override {
    return OnEveryRank(
        [&](int r) { return ranks_[r]->CopyStash(name, state_offset, stash_offset, bytes, to_stash); });
  }
  int64_t position() const override { return ranks_[0]->position(); }
  int64_t context_capacity() const override { return ranks_[0]->context_capacity(); }
  void set_observer(ValueObserver o) override { ranks_[0]->set_observer(std::move(o)); }
  double load_seconds() const override { return load_seconds_; }
  std::string ProfileReport() const override { return ranks_[0]->ProfileReport(); }
  std::string Describe() const override {
    return absl::StrFormat("%d tensor-parallel ranks, each a %s", group_.size(), ranks_[0]->Describe());
  }
  void set_load_seconds(double s) { load_seconds_ = s; }

 private:
  // fn(r) on every rank at once (rank 0 on this thread). A failing rank aborts the group so the
  // ranks waiting for it in a collective return; the first failure (lowest rank) is the result.
  absl::Status OnEveryRank(const std::function<absl::Status(int)>& fn) {
    const int tp = group_.size();
    std::vector<absl::Status> status(tp);
    auto one = [&](int r) {
      status[r] = fn(r);
      if (!status[r].ok()) group_.Abort(absl::StrCat("rank ", r, ": ", status[r].message()));
    };
    std::vector<std::thread> threads;
    for (int r = 1; r < tp; ++r) threads.emplace_back(one, r);
    one(0);
    for (std::thread& t : threads) t.join();
    // An abort answers the ranks that waited with "aborted": report the cause, not the echo.
    absl::Status first;
    for (int r = 0; r < tp; ++r)
      if (!status[r].ok() && (first.ok() || (absl::IsAborted(first) && !absl::IsAborted(status[r]))))
        first = tp > 1 ? absl::Status(status[r].code(), absl::StrCat("rank ", r, ": ", status[r].message()))
                       : status[r];
    if (!first.ok()) group_.Reset();
    return first;
  }

  Backend backend_;
  ThreadGroup group_;
  std::vector<std::unique_ptr<Executor>> ranks_;
  double load_seconds_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateTensorParallelExecutor(Backend backend, const ir::Module& module,
                                                                       const gguf::GgufFile& file,
                                                                       const ExecutorOptions& options) {
  const int64_t tp = module.attrs().I64Or("tp", 1);
  if (tp < 2 || tp > 1024)
    return absl::InvalidArgumentError(absl::StrCat("a tensor-parallel module needs tp in [2, 1024], it has ", tp));
  if (backend == Backend::kCuda)
    return absl::UnimplementedError(absl::StrCat(
        "--tp ", tp, " on the CUDA backend needs NCCL between the GPUs, which memra does not drive yet "
        "(docs/design/tensor-parallel.md); --backend cpu runs the split on the CPU"));
  const auto t0 = std::chrono::steady_clock::now();
  auto e = std::make_unique<TensorParallelExecutor>(backend, static_cast<int>(tp));
  MEMRA_RETURN_IF_ERROR(e->Init(module, file, options));
  e->set_load_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return std::unique_ptr<Executor>(std::move(e));
}

}  // namespace memra::runtime
