#include "runtime/TensorParallelExecutor.h"

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/StatusMacros.h"
#include "kernels/cpu/ThreadPool.h"
#include "runtime/RankThreads.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/Nccl.h"

namespace memra::runtime {
namespace {

class TensorParallelExecutor final : public Executor {
 public:
  TensorParallelExecutor(Backend backend, int tp) : backend_(backend), group_(tp), threads_(tp) {}

  absl::Status Init(const ir::Module& module, const gguf::GgufFile& file, const ExecutorOptions& options) {
    const int tp = group_.size();
    ranks_.resize(tp);
    MEMRA_RETURN_IF_ERROR(OnEveryRank([&](int r) -> absl::Status {
      ExecutorOptions o = options;
      o.tp_rank = r;
      // The machine's threads shared among CPU ranks.
      const int threads = o.cpu.threads > 0 ? o.cpu.threads : kernels::cpu::ThreadPool::DefaultThreadCount();
      o.cpu.threads = std::max(1, threads / tp);
      o.cpu.communicator = group_.rank(r);
      // Rank r on device (first + r).
      o.cuda.device = options.cuda.device + r;
      o.cuda.tp_rank = r;
      o.cuda.tp_size = tp;
      o.cuda.progress = options.cuda.progress && r == 0;
      MEMRA_ASSIGN_OR_RETURN(ranks_[r], CreateExecutor(backend_, module, file, o));
      return absl::OkStatus();
    }));
    if (backend_ != Backend::kCuda) return absl::OkStatus();
    // The standard bootstrap: rank 0's id, every rank joining on its thread with its device current.
    MEMRA_ASSIGN_OR_RETURN(const cuda::Nccl* nccl, cuda::Nccl::Get());
    MEMRA_ASSIGN_OR_RETURN(const cuda::NcclId id, nccl->UniqueId());
    comms_.resize(tp);
    return OnEveryRank([&](int r) -> absl::Status {
      MEMRA_RETURN_IF_ERROR(ranks_[r]->cuda()->MakeCurrent());
      MEMRA_ASSIGN_OR_RETURN(comms_[r], cuda::NcclCommunicator::Create(id, tp, r));
      ranks_[r]->cuda()->set_communicator(comms_[r].get());
      return absl::OkStatus();
    });
  }

  Backend backend() const override { return backend_; }

  absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args) override {
    return RunOnRanks(name, args, nullptr);
  }
  absl::StatusOr<std::vector<HostTensor>> RunSelected(absl::string_view name, std::vector<HostTensor> args,
                                                      const std::vector<bool>& want) override {
    return RunOnRanks(name, args, &want);
  }
  // Every rank runs its own greedy loop (the device loop on CUDA ranks): the logits are gathered
  // whole on every rank, so every rank picks the same token and feeds it to its next step without
  // the host. The ranks' picks are compared, so a partition that left them apart is an error, not
  // a silent divergence.
  absl::StatusOr<std::vector<int32_t>> DecodeGreedy(int32_t token, int64_t n_steps, int64_t first_step) override {
    std::vector<std::vector<int32_t>> ids(ranks_.size());
    MEMRA_RETURN_IF_ERROR(OnEveryRank([&](int r) -> absl::Status {
      MEMRA_ASSIGN_OR_RETURN(ids[r], ranks_[r]->DecodeGreedy(token, n_steps, first_step));
      return absl::OkStatus();
    }));
    for (size_t r = 1; r < ids.size(); ++r)
      if (ids[r] != ids[0])
        return absl::InternalError(absl::StrCat("tensor-parallel greedy decode: rank ", r,
                                                " picked other tokens than rank 0 (the ranks' logits differ)"));
    return std::move(ids[0]);
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
    return OnEveryRank([&](int r) { return ranks_[r]->CopyStash(name, state_offset, stash_offset, bytes, to_stash); });
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
  // Results are rank 0's: the other ranks bring none back (on CUDA, no device-to-host copies).
  absl::StatusOr<std::vector<HostTensor>> RunOnRanks(absl::string_view name, const std::vector<HostTensor>& args,
                                                     const std::vector<bool>* want) {
    std::vector<HostTensor> out;
    MEMRA_RETURN_IF_ERROR(OnEveryRank([&](int r) -> absl::Status {
      std::vector<HostTensor> mine;
      for (const HostTensor& a : args) mine.push_back(a.Clone());
      if (r > 0) return ranks_[r]->RunSelected(name, std::move(mine), {}).status();
      MEMRA_ASSIGN_OR_RETURN(out, want != nullptr ? ranks_[0]->RunSelected(name, std::move(mine), *want)
                                                  : ranks_[0]->Run(name, std::move(mine)));
      return absl::OkStatus();
    }));
    return out;
  }
  // fn(r) on every rank at once (rank 0 on this thread, rank r on its own: RankThreads). A failing
  // rank aborts the group so the ranks waiting for it in a collective return; the first failure
  // (lowest rank) is the result.
  absl::Status OnEveryRank(const std::function<absl::Status(int)>& fn) {
    const int tp = group_.size();
    std::vector<absl::Status> status(tp);
    auto one = [&](int r) {
      status[r] = fn(r);
      if (status[r].ok()) return;
      group_.Abort(absl::StrCat("rank ", r, ": ", status[r].message()));
      // Non-finite logits (DataLoss) come from every rank alike at the same step, after its
      // collectives: no rank waits for another, and the group stays usable.
      if (absl::IsDataLoss(status[r])) return;
      // GPU ranks may wait inside NCCL for the failed one: abort their communicators (the group
      // cannot run again).
      std::lock_guard<std::mutex> lock(abort_mu_);
      for (auto& c : comms_)
        if (c) c->Abort();
    };
    threads_.Run(one);
    // An abort answers the ranks that waited with "aborted": report the cause, not the echo.
    absl::Status first;
    for (int r = 0; r < tp; ++r)
      if (!status[r].ok() && (first.ok() || (absl::IsAborted(first) && !absl::IsAborted(status[r]))))
        first =
            tp > 1 ? absl::Status(status[r].code(), absl::StrCat("rank ", r, ": ", status[r].message())) : status[r];
    if (!first.ok()) group_.Reset();
    return first;
  }

  Backend backend_;
  ThreadGroup group_;
  std::vector<std::unique_ptr<cuda::NcclCommunicator>> comms_;  // CUDA ranks (destroyed after ranks_)
  std::vector<std::unique_ptr<Executor>> ranks_;
  RankThreads threads_;  // after the ranks: its workers stop before the ranks are destroyed
  std::mutex abort_mu_;
  double load_seconds_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateTensorParallelExecutor(Backend backend, const ir::Module& module,
                                                                       const gguf::GgufFile& file,
                                                                       const ExecutorOptions& options) {
  const int64_t tp = module.attrs().I64Or("tp", 1);
  if (tp < 2 || tp > 1024)
    return absl::InvalidArgumentError(absl::StrCat("a tensor-parallel module needs tp in [2, 1024], it has ", tp));
  if (backend == Backend::kCuda) {
    MEMRA_RETURN_IF_ERROR(CudaAvailable());
    MEMRA_ASSIGN_OR_RETURN(const cuda::CudaDriver* d, cuda::CudaDriver::Get());
    int n = 0;
    d->cuDeviceGetCount(&n);
    if (options.cuda.device + tp > n)
      return absl::InvalidArgumentError(absl::StrCat("--tp ", tp, " runs rank r on GPU ", options.cuda.device,
                                                     " + r; this machine has ", n, " GPU", n == 1 ? "" : "s"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto e = std::make_unique<TensorParallelExecutor>(backend, static_cast<int>(tp));
  MEMRA_RETURN_IF_ERROR(e->Init(module, file, options));
  e->set_load_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return std::unique_ptr<Executor>(std::move(e));
}

}  // namespace memra::runtime
