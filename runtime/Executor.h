// The executor interface Session drives: one module's functions run on one backend (the CPU
// executor, runtime/cpu/CpuExecutor.h, or the CUDA executor, runtime/cuda/CudaExecutor.h), with
// the module's state kept across calls. Both take and return HostTensors, so Session, memra run
// and the tests are backend-agnostic.
//
//   auto exec = CreateExecutor(Backend::kCuda, module, gguf, options);
//   auto logits = (*exec)->Run("prefill", {HostTensor::FromI32(ids, {T})});
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"
#include "runtime/cpu/CpuExecutor.h"
#include "runtime/cpu/HostTensor.h"
#include "runtime/cuda/CudaExecutor.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::runtime {

enum class Backend { kCpu, kCuda };

// "cpu" / "cuda"; anything else is an InvalidArgument naming the choices.
absl::StatusOr<Backend> ParseBackend(absl::string_view name);
absl::string_view BackendName(Backend b);
// OK when a CUDA driver and at least one device are usable here; else why not
// (FailedPrecondition). Loads the driver once per process; cheap afterwards.
absl::Status CudaAvailable();
// The backend memra run uses without --backend: cuda when CudaAvailable(), else cpu.
Backend DefaultBackend();

class Executor {
 public:
  virtual ~Executor() = default;
  virtual Backend backend() const = 0;
  // Runs function `name`; results on the host. State persists across calls.
  virtual absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args) = 0;
  // Run, bringing back only the results `want` marks (the others come back empty): a greedy step
  // reads its device picks and leaves the [S, V] logits on the device. The default runs Run.
  virtual absl::StatusOr<std::vector<HostTensor>> RunSelected(absl::string_view name, std::vector<HostTensor> args,
                                                              const std::vector<bool>& want) {
    (void)want;
    return Run(name, std::move(args));
  }
  // Greedy decoding: runs @decode n_steps times from `token` (the last token, not yet in the
  // state), each step's argmax feeding the next; returns the n_steps generated ids. The CUDA
  // executor keeps the loop on the device (one graph per step, one sync per call; the logits stay
  // there); this default runs Run("decode") and the host's greedy pick per step. Logits that are
  // not all finite stop the loop with runtime/Logits.h's DataLoss error naming the step, numbered
  // from `first_step` (a caller that decodes in chunks passes its running count + 1); the state
  // then holds the steps that ran (on CUDA: the whole chunk of the failing step).
  virtual absl::StatusOr<std::vector<int32_t>> DecodeGreedy(int32_t token, int64_t n_steps, int64_t first_step = 1);
  // Forgets all state (position 0).
  virtual absl::Status ResetState() = 0;
  // Writes `bytes` bytes of `data` (zeros when null) into state @name at byte `offset`, ordered
  // with the calls: the host's part of a module lowered with slots (runtime/BatchedSlots.h).
  virtual absl::Status WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes) = 0;
  // A store beside the state for copies of state regions (the prefix cache's snapshots,
  // docs/design/prefix-reuse.md), in device memory on CUDA: AllocateStash sizes it once (a second
  // call replaces it, contents lost); CopyStash copies `bytes` bytes between state @name at byte
  // `state_offset` and the stash at byte `stash_offset` (to_stash: state -> stash, else back),
  // ordered with the calls. Errors name the region that does not fit.
  virtual absl::Status AllocateStash(int64_t bytes) = 0;
  virtual absl::Status CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                                 bool to_stash) = 0;
  virtual int64_t position() const = 0;
  virtual int64_t context_capacity() const = 0;
  // Called after every op for each named result (tracing; the CUDA executor synchronizes).
  virtual void set_observer(ValueObserver observer) = 0;
  virtual double load_seconds() const = 0;
  // Per op kind timing (when the options asked for profiling).
  virtual std::string ProfileReport() const = 0;
  // One line for logs: "cpu executor (8 threads, per-row weights)", "cuda executor (H200 ...)".
  virtual std::string Describe() const = 0;
  // The concrete executors (null for the other backend).
  virtual CpuExecutor* cpu() { return nullptr; }
  virtual CudaExecutor* cuda() { return nullptr; }
};

struct ExecutorOptions {
  CpuExecutorOptions cpu;
  CudaExecutorOptions cuda;
  // >= 0: this executor is that rank of a tensor-parallel group (runtime/TensorParallelExecutor.h
  // sets it); -1: a module of tp > 1 gets a TensorParallelExecutor driving all its ranks.
  int tp_rank = -1;
};

// `module` and `file` must outlive the executor. Cuda without a usable GPU: FailedPrecondition
// "--backend cuda: no usable CUDA GPU here (...)".
absl::StatusOr<std::unique_ptr<Executor>> CreateExecutor(Backend backend, const ir::Module& module,
                                                         const gguf::GgufFile& file,
                                                         const ExecutorOptions& options = {});

}  // namespace memra::runtime
