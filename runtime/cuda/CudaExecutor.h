// The CUDA executor: runs a Module's functions on one GPU, op by op, with the NVRTC-compiled
// kernels of kernels/cuda (codegen/KernelSelect picks them) and cuBLASLt GEMMs. Its interface
// mirrors the CPU executor (runtime/cpu/CpuExecutor.h):
//
//   auto exec = CudaExecutor::Create(module, gguf, {});   // device, weight upload, state
//   auto out = exec->Run("prefill", {HostTensor::FromI32(ids, {T})});
//
// Calls are shape-bucketed: T tokens run the program of bucket TokenBucket(T) (16, 32, ...,
// 4096; decode T = 1), compiled once per (function, bucket) with kernels specialized to it and
// one device arena laid out by liveness (bump/first-fit). Padded rows are masked by the kernels
// (they receive the valid count) and never read as data. Weights: f32/f16/bf16 uploaded as is,
// quantized ones dequantized to bf16 (docs/ARCHITECTURE.md, "CUDA executor"). State (KV cache,
// conv rings, delta-net states, position counter) lives on the device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/KernelCompiler.h"
#include "ir/Module.h"
#include "runtime/cpu/CpuExecutor.h"
#include "runtime/cpu/HostTensor.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::runtime {

namespace cuda {
class CudaDevice;
class CublasLt;
class DeviceBuffer;
class LoadedModule;
}  // namespace cuda

struct CudaExecutorOptions {
  int device = 0;
  std::string kernel_cache_dir;  // empty: ~/.cache/memra; "-": no disk cache
  int compile_jobs = 0;          // 0: all cores
  bool sync_each_op = false;     // synchronize after every op so errors name it (debugging)
  bool progress = true;          // weight-upload progress bar
  bool profile = false;          // time every op with events (ProfileReport)
  bool poison_arena = false;     // fill the arena with NaN before every call (tests: catches
                                 // elements a kernel never writes)
};

class CudaExecutor {
 public:
  // Errors: "no CUDA driver/GPU found" (no driver / device), NVRTC or cuBLASLt missing, a
  // weight missing or mistyped (as the CPU executor), device memory exhausted (named).
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const ir::Module& module,
                                                              const gguf::GgufFile& file,
                                                              const CudaExecutorOptions& options = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Runs function `name`; results come back to the host. State persists across calls.
  absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args);
  // Compiles and lays out the program of `name` for the bucket of T tokens ahead of a call.
  absl::Status Prepare(absl::string_view name, int64_t T);

  absl::Status ResetState();
  int64_t position() const { return position_; }
  int64_t context_capacity() const { return kv_capacity_; }
  // A copy of state buffer `name` on the host (f32 / i32).
  absl::StatusOr<HostTensor> ReadState(absl::string_view name) const;
  // Called after every op for each named result (synchronizes and downloads: tests only).
  void set_observer(ValueObserver observer) { observer_ = std::move(observer); }

  const codegen::CompileStats& compile_stats() const;
  std::string DeviceDescription() const;
  double load_seconds() const { return load_seconds_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Device time of the last Run (events around its launches), milliseconds.
  double last_run_ms() const { return last_run_ms_; }
  // Device time per op kind over the calls since the last ResetProfile (options.profile):
  // kind, calls, total ms, share; matmuls also with their FLOP rate and weight-streaming rate.
  std::string ProfileReport() const;
  void ResetProfile() { profile_.clear(); }
  // Bytes of the arenas laid out so far, per (function, bucket) key "prefill@64".
  std::map<std::string, uint64_t> arena_bytes() const;

  struct DeviceWeight;
  struct Program;

 private:
  CudaExecutor(const ir::Module& module, const gguf::GgufFile& file, CudaExecutorOptions options);
  absl::Status UploadWeights();
  absl::Status AllocateState();
  absl::StatusOr<Program*> GetProgram(const ir::Function& fn, int64_t bucket);

  const ir::Module& module_;
  const gguf::GgufFile& file_;
  CudaExecutorOptions options_;
  std::unique_ptr<cuda::CudaDevice> dev_;
  std::unique_ptr<cuda::CublasLt> blas_;
  std::unique_ptr<codegen::KernelCompiler> compiler_;
  std::map<std::string, std::unique_ptr<cuda::LoadedModule>> modules_;
  absl::flat_hash_map<const ir::Value*, std::unique_ptr<DeviceWeight>> weights_;
  absl::flat_hash_map<const ir::Value*, std::unique_ptr<cuda::DeviceBuffer>> state_;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<Program>> programs_;
  const ir::StateVar* position_state_ = nullptr;
  int64_t position_ = 0;
  int64_t kv_capacity_ = INT64_MAX;
  uint64_t weight_bytes_ = 0;
  double load_seconds_ = 0;
  double last_run_ms_ = 0;
  ValueObserver observer_;
  struct ProfileEntry {
    int64_t count = 0;
    double ms = 0, flops = 0, bytes = 0;
  };
  std::map<std::string, ProfileEntry> profile_;
};

}  // namespace memra::runtime
