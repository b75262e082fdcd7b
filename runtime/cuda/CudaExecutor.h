// The CUDA executor: runs a Module's functions on one GPU, op by op, with the NVRTC-compiled
// kernels of kernels/cuda (codegen/KernelSelect picks them) and cuBLASLt GEMMs. Its interface
// mirrors the CPU executor (runtime/cpu/CpuExecutor.h):
//
//   auto exec = CudaExecutor::Create(module, gguf, {});   // device, weight upload, state
//   auto out = exec->Run("prefill", {HostTensor::FromI32(ids, {T})});
//
// Calls are shape-bucketed: T tokens run the program of bucket TokenBucket(T) (16, 32, ...,
// 4096; decode T = 1), compiled once per (function, bucket) with kernels specialized to it and
// one device arena laid out by liveness (first-fit; a static function that went through
// plan-memory uses the plan's offsets instead, so its addresses are the plan's). Padded rows are
// masked by the kernels (they receive the valid count) and never read as data. Weights
// (kernels/cuda/WeightLayout.h): f32/f16/bf16 uploaded as is, block formats (q4_K, q8_0, ...)
// uploaded as their GGUF blocks (options.weights = blocks, the default: device weight bytes ==
// the tensor bytes; products dequantize into one shared bf16 workspace) or as bf16 copies
// dequantized on the host (bf16). Before anything is uploaded every weight's layout is checked
// (one error naming a tensor whose type has none) and the device memory by kind (weights, KV
// cache, recurrent state, workspace, the largest planned arena) against the free memory. State
// (KV cache, conv rings, delta-net states, position counter) lives on the device.
//
// CUDA graphs: the ops of a static function (a bucket function @prefill_tN, @decode) run in the
// segments partition-segments recorded (or, in a module that did not run it, the same per-op
// rule, passes/Capture.h). A capturable segment runs eagerly on the program's first call (which
// also loads lazily loaded kernels), is captured on the second and replayed from then on; the
// rest runs eagerly. Replay is bit-identical to eager execution (tests/cuda/CudaGraph_test.cc).
// DecodeGreedy closes the decode loop on the device: one captured graph = the decode step + the
// greedy pick that feeds the next step's token and appends it to a device token ring, launched
// n times back to back with one synchronization at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/KernelCompiler.h"
#include "ir/Module.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"
#include "runtime/DeviceMemory.h"
#include "runtime/cpu/CpuExecutor.h"
#include "runtime/cpu/HostTensor.h"
#include "runtime/cuda/CudaDriver.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::runtime {

namespace cuda {
class NcclCommunicator;
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
  bool cuda_graphs = true;       // replay capturable segments as CUDA graphs (off: all eager;
                                 // profiling, sync_each_op and observers also run eagerly)
  // Launch kernels with programmatic dependent launch where the device has it (sm_90+): each
  // kernel becomes resident while the one before it still runs (its weight copies start early)
  // and orders itself with griddepcontrol.wait (memra run / bench `--pdl`).
  bool pdl = true;
  // Timing only (memra bench `--profile-skip`): the ops whose mnemonic, unit or kernel entry is
  // named here issue no device work, so the difference in step time against a run without it is
  // what those ops cost inside the CUDA graph, overlap with their neighbours included (which
  // `profile`'s events, eager, cannot show). Their results stay whatever the arena held: the
  // logits of such a run are garbage, and skipping an op whose results are positions or indices can
  // send later kernels out of bounds (an illegal-address error).
  std::vector<std::string> skip_ops;
  // How block-format matrices are held (memra run / bench `--weights blocks|bf16`). A module
  // selected by select-kernels must have been selected for the same mode (its kernel_weights).
  kernels::cuda::WeightMode weights = kernels::cuda::WeightMode::kBlocks;
  // Module key -> cubin (a plan's kernel table, runtime::PrecompiledKernels): seeded into the
  // kernel compiler, which then compiles only what the plan lacks.
  std::shared_ptr<const codegen::PrecompiledCubins> precompiled;
  // Fault injection (tests; memra run `--inject-fault`): the nth device allocation / NVRTC compile
  // of this executor (1-based, counted from Create) fails as a refusal by the driver or the
  // compiler would. 0: none.
  int fail_device_alloc = 0;
  int fail_compile = 0;
  // Device memory this executor may take in all (weights, state, workspace, arenas), checked
  // before anything is uploaded (--max-device-memory); 0: what the device has free.
  uint64_t memory_budget = 0;
  // One rank of a tensor-parallel module (its tp attribute): the slices of the sharded weights
  // this executor uploads (runtime/WeightShard.h). The collectives go through the communicator
  // set_communicator attaches (NCCL); without one, all_reduce and a one-part all_gather copy.
  int tp_rank = 0;
  int tp_size = 1;
};

// Counters of graph use since the executor was created.
struct GraphStats {
  int64_t captured = 0;                // graphs captured and instantiated
  int64_t launches = 0;                // graph launches
  int64_t eager_segments = 0;          // segment executions issued op by op
  double capture_ms = 0;               // host time spent capturing + instantiating
  int64_t capture_failures = 0;        // segments that could not be captured (they run eagerly)
  std::string last_capture_failure;    // why, for the last one
  int64_t skipped_actions = 0;         // device actions not issued (skip_ops), summed over every
                                       // capture and eager run
  std::set<std::string> skip_matched;  // the names of skip_ops that matched an op, unit or kernel
};

// The target description of CUDA device `ordinal` (kernels/cuda/Target.h), for compiling a
// module for it before an executor exists. Errors as CudaDevice::Open.
absl::StatusOr<kernels::cuda::Target> CudaDeviceTarget(int ordinal = 0);

class CudaExecutor {
 public:
  // Errors: "no CUDA driver/GPU found" (no driver / device), NVRTC or cuBLASLt missing, a
  // weight missing or mistyped (as the CPU executor), a matrix whose type has no GPU layout in
  // options.weights (naming it and --weights bf16), a module selected for the other weight mode,
  // not enough free device memory for weights + state + workspace + the largest planned arena
  // (every figure named; all before the first weight is uploaded).
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const ir::Module& module, const gguf::GgufFile& file,
                                                              const CudaExecutorOptions& options = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Runs function `name`; results come back to the host. State persists across calls.
  // `want` (optional): the results to bring back; the others come back empty.
  absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args,
                                              const std::vector<bool>* want = nullptr);
  // Greedy decoding on the device: runs @decode n_steps times starting from `token` (the last
  // token, not yet in the cache); each step's argmax is the next step's token. Returns the n_steps
  // generated ids; the position advances by n_steps. With cuda_graphs the step is one graph
  // launched n_steps times and the host synchronizes once; the logits never leave the device.
  // Errors: context overflow (before anything runs), a token outside the vocabulary; logits that
  // are not all finite (the greedy pick checks every value on the device; the host turns the first
  // such step of a chunk into runtime/Logits.h's DataLoss error after the chunk's sync, numbering
  // steps from first_step; the position then counts every step that ran).
  absl::StatusOr<std::vector<int32_t>> DecodeGreedy(int32_t token, int64_t n_steps, int64_t first_step = 1);
  // Compiles and lays out the program of `name` for the bucket of T tokens ahead of a call
  // (@decode: with the device loop's greedy pick).
  absl::Status Prepare(absl::string_view name, int64_t T);

  absl::Status ResetState();
  int64_t position() const { return position_; }
  int64_t context_capacity() const { return kv_capacity_; }
  // Writes `bytes` bytes of `data` (zeros when null) into state @name at byte `offset`, ordered
  // with the launches (the host's part of a module lowered with slots: a slot's reset,
  // block-table entries).
  absl::Status WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes);
  // The stash of runtime/Executor.h: device memory, copies on the stream.
  absl::Status AllocateStash(int64_t bytes);
  absl::Status CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                         bool to_stash);
  // A copy of state buffer `name` on the host (f32 / i32).
  absl::StatusOr<HostTensor> ReadState(absl::string_view name) const;
  // Called after every op for each named result (synchronizes and downloads: tests only).
  void set_observer(ValueObserver observer) { observer_ = std::move(observer); }
  // Makes this executor's device context current on the calling thread (before work of another
  // library on its device: NCCL's communicator).
  absl::Status MakeCurrent() const;
  // The rank's communicator for all_reduce / all_gather (not owned; made on this executor's device).
  void set_communicator(cuda::NcclCommunicator* comm) { comm_ = comm; }

  const codegen::CompileStats& compile_stats() const;
  const GraphStats& graph_stats() const { return graph_stats_; }
  std::string DeviceDescription() const;
  // The device's target description (kernels/cuda/Target.h): what kernel selection reads.
  const kernels::cuda::Target& target() const { return target_; }
  double load_seconds() const { return load_seconds_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Device memory held now, by kind (arenas: the programs laid out so far).
  DeviceMemoryBytes device_memory() const;
  kernels::cuda::WeightMode weight_mode() const { return options_.weights; }
  bool programmatic_launch() const { return programmatic_launch_; }  // --pdl on a device that has it
  // Device time of the last Run (events around its launches), milliseconds.
  double last_run_ms() const { return last_run_ms_; }
  // Device time per op kind over the calls since the last ResetProfile (options.profile):
  // kind, calls, total ms, share; matmuls also with their FLOP rate and weight-streaming rate.
  std::string ProfileReport() const;
  void ResetProfile() { profile_.clear(); }
  // Bytes of the arenas laid out so far, per (function, bucket) key "prefill@64".
  std::map<std::string, uint64_t> arena_bytes() const;
  // Whether function `name`'s program (once prepared) uses the module's memory plan (plan-memory's
  // offsets in a static function) instead of the executor's own layout.
  bool UsesMemoryPlan(absl::string_view name) const;

  struct DeviceWeight;
  struct Program;

 private:
  CudaExecutor(const ir::Module& module, const gguf::GgufFile& file, CudaExecutorOptions options);
  // Every weight's layout and device bytes, and the workspace; checks them with the state and the
  // largest planned arena against the free memory. Allocates nothing but the workspace.
  absl::Status PlanDeviceMemory();
  absl::Status UploadWeights();
  absl::Status AllocateState();
  absl::StatusOr<Program*> GetProgram(const ir::Function& fn, int64_t bucket);
  // Issues the device work of one step (op) of `p` on the stream; `work` gets its FLOPs / bytes.
  absl::Status EnqueueStep(Program& p, size_t step, const ir::SymbolBindings& bindings,
                           std::pair<double, double>* work);
  // Every step of `p`: capturable segments as graphs (captured on the second call), the rest eager.
  absl::Status EnqueueProgram(Program& p, const ir::SymbolBindings& bindings, bool allow_graphs);
  // Records what `enqueue` issues on the stream into an instantiated graph.
  absl::StatusOr<cuda::CUgraphExec> Capture(const std::function<absl::Status()>& enqueue, absl::string_view what);
  bool GraphsAllowed() const;
  absl::Status PrepareGreedy(Program& p);    // greedy_next kernel + token ring for @decode
  void AccumulateProfile(const Program& p);  // the per-step events of p's last call -> profile_

  const ir::Module& module_;
  const gguf::GgufFile& file_;
  CudaExecutorOptions options_;
  std::unique_ptr<cuda::CudaDevice> dev_;
  kernels::cuda::Target target_;
  bool programmatic_launch_ = false;     // options_.pdl on a device that has it
  kernels::cuda::DeviceWork step_work_;  // EnqueueStep's scratch list, reused
  std::unique_ptr<cuda::CublasLt> blas_;
  std::unique_ptr<codegen::KernelCompiler> compiler_;
  std::map<std::string, std::unique_ptr<cuda::LoadedModule>> modules_;
  absl::flat_hash_map<const ir::Value*, std::unique_ptr<DeviceWeight>> weights_;
  absl::flat_hash_map<const ir::Value*, std::unique_ptr<cuda::DeviceBuffer>> state_;
  std::unique_ptr<cuda::DeviceBuffer> stash_;      // AllocateStash
  std::vector<PlannedWeight> weight_plans_;        // PlanDeviceMemory -> UploadWeights
  std::unique_ptr<cuda::DeviceBuffer> workspace_;  // the units' shared workspace (workspace_bytes)
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<Program>> programs_;
  const ir::StateVar* position_state_ = nullptr;
  int64_t position_ = 0;
  int64_t kv_capacity_ = INT64_MAX;
  uint64_t weight_bytes_ = 0;
  double load_seconds_ = 0;
  double last_run_ms_ = 0;
  ValueObserver observer_;
  cuda::NcclCommunicator* comm_ = nullptr;
  GraphStats graph_stats_;
  // i32[kTokenRing] + the write index + the non-finite record (step, id, value bits)
  std::unique_ptr<cuda::DeviceBuffer> token_ring_;
  struct ProfileEntry {
    int64_t count = 0;
    double ms = 0, flops = 0, bytes = 0;
  };
  std::map<std::string, ProfileEntry> profile_;
};

}  // namespace memra::runtime
