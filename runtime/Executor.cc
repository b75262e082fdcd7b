#include "runtime/Executor.h"

#include "runtime/TensorParallelExecutor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/StatusMacros.h"
#include "kernels/cpu/Sampling.h"
#include "runtime/Logits.h"
#include "runtime/cuda/CudaDriver.h"

namespace memra::runtime {

absl::StatusOr<std::vector<int32_t>> Executor::DecodeGreedy(int32_t token, int64_t n_steps, int64_t first_step) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n_steps; ++i) {
    std::vector<HostTensor> args;
    args.push_back(HostTensor::FromI32({token}, {1}));
    MEMRA_ASSIGN_OR_RETURN(std::vector<HostTensor> r, Run("decode", std::move(args)));
    const float* logits = r[0].f32();
    if (const int64_t bad = FirstNonFiniteLogit(logits, r[0].numel()); bad >= 0)
      return NonFiniteLogitsError(absl::StrCat("decode step ", first_step + i), logits[bad], bad);
    token = kernels::cpu::Argmax(logits, r[0].numel());
    out.push_back(token);
  }
  return out;
}

namespace {

class CpuBackend final : public Executor {
 public:
  explicit CpuBackend(std::unique_ptr<CpuExecutor> e) : e_(std::move(e)) {}
  Backend backend() const override { return Backend::kCpu; }
  absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args) override {
    return e_->Run(name, std::move(args));
  }
  absl::Status ResetState() override {
    e_->ResetState();
    return absl::OkStatus();
  }
  absl::Status WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes) override {
    return e_->WriteState(name, offset, data, bytes);
  }
  absl::Status AllocateStash(int64_t bytes) override { return e_->AllocateStash(bytes); }
  absl::Status CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                         bool to_stash) override {
    return e_->CopyStash(name, state_offset, stash_offset, bytes, to_stash);
  }
  int64_t position() const override { return e_->position(); }
  int64_t context_capacity() const override { return e_->context_capacity(); }
  void set_observer(ValueObserver o) override { e_->set_observer(std::move(o)); }
  double load_seconds() const override { return e_->load_seconds(); }
  std::string ProfileReport() const override { return e_->ProfileReport(); }
  std::string Describe() const override {
    return absl::StrFormat("cpu executor (%d threads, %s weights)", e_->num_threads(),
                           e_->weight_mode() == WeightMode::kPerRow ? "per-row" : "dequant");
  }
  CpuExecutor* cpu() override { return e_.get(); }

 private:
  std::unique_ptr<CpuExecutor> e_;
};

class CudaBackend final : public Executor {
 public:
  explicit CudaBackend(std::unique_ptr<CudaExecutor> e) : e_(std::move(e)) {}
  Backend backend() const override { return Backend::kCuda; }
  absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args) override {
    return e_->Run(name, std::move(args));
  }
  absl::StatusOr<std::vector<HostTensor>> RunSelected(absl::string_view name, std::vector<HostTensor> args,
                                                      const std::vector<bool>& want) override {
    return e_->Run(name, std::move(args), &want);
  }
  absl::Status ResetState() override { return e_->ResetState(); }
  absl::Status WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes) override {
    return e_->WriteState(name, offset, data, bytes);
  }
  absl::Status AllocateStash(int64_t bytes) override { return e_->AllocateStash(bytes); }
  absl::Status CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                         bool to_stash) override {
    return e_->CopyStash(name, state_offset, stash_offset, bytes, to_stash);
  }
  int64_t position() const override { return e_->position(); }
  int64_t context_capacity() const override { return e_->context_capacity(); }
  void set_observer(ValueObserver o) override { e_->set_observer(std::move(o)); }
  double load_seconds() const override { return e_->load_seconds(); }
  std::string ProfileReport() const override { return e_->ProfileReport(); }
  std::string Describe() const override {
    return absl::StrFormat("cuda executor (%s, weights as %s; device memory: %s)", e_->DeviceDescription(),
                           kernels::cuda::WeightModeName(e_->weight_mode()), DescribeDeviceMemory(e_->device_memory()));
  }
  absl::StatusOr<std::vector<int32_t>> DecodeGreedy(int32_t token, int64_t n_steps, int64_t first_step = 1) override {
    return e_->DecodeGreedy(token, n_steps, first_step);
  }
  CudaExecutor* cuda() override { return e_.get(); }

 private:
  std::unique_ptr<CudaExecutor> e_;
};

}  // namespace

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  return absl::InvalidArgumentError(absl::StrCat("--backend ", name, ": the backends are cpu and cuda"));
}

absl::string_view BackendName(Backend b) { return b == Backend::kCuda ? "cuda" : "cpu"; }

absl::Status CudaAvailable() {
  static const absl::Status* status = [] {
    auto drv = cuda::CudaDriver::Get();
    if (!drv.ok()) return new absl::Status(drv.status());
    int n = 0;
    if ((*drv)->cuDeviceGetCount(&n) != 0 || n == 0)
      return new absl::Status(absl::FailedPreconditionError("the CUDA driver reports no device"));
    return new absl::Status();
  }();
  return *status;
}

Backend DefaultBackend() { return CudaAvailable().ok() ? Backend::kCuda : Backend::kCpu; }

absl::StatusOr<std::unique_ptr<Executor>> CreateExecutor(Backend backend, const ir::Module& module,
                                                         const gguf::GgufFile& file, const ExecutorOptions& options) {
  // A partitioned module runs as its ranks (each rank's executor comes back here with its
  // communicator set).
  if (module.attrs().I64Or("tp", 1) > 1 && options.tp_rank < 0)
    return CreateTensorParallelExecutor(backend, module, file, options);
  if (backend == Backend::kCpu) {
    MEMRA_ASSIGN_OR_RETURN(auto e, CpuExecutor::Create(module, file, options.cpu));
    return std::unique_ptr<Executor>(std::make_unique<CpuBackend>(std::move(e)));
  }
  if (absl::Status st = CudaAvailable(); !st.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("--backend cuda: no usable CUDA GPU here (", st.message(), "); use --backend cpu"));
  MEMRA_ASSIGN_OR_RETURN(auto e, CudaExecutor::Create(module, file, options.cuda));
  return std::unique_ptr<Executor>(std::make_unique<CudaBackend>(std::move(e)));
}

}  // namespace memra::runtime
