// The CPU executor: interprets a Module's functions op by op with the kernels/cpu reference
// kernels (f32 activations, f32 accumulation), binding weights by name from the GGUF and owning
// the module's state (KV cache f32, conv rings, delta-net states, position counter).
//
//   auto exec = CpuExecutor::Create(module, gguf);          // binds weights, allocates state
//   auto out = exec->Run("prefill", {HostTensor::FromI32(ids, {T})});   // T bound from the args
//   auto next = exec->Run("decode", {HostTensor::FromI32({id}, {1})});
//
// Symbols (T) are bound from the argument shapes; every op result is checked against its IR type
// under those bindings. Running past the KV capacity is a clear error raised before any state is
// touched. Results do not depend on the thread count (the kernels' contract), and prefill split
// into chunks gives the same logits as one call (every kernel computes a token's result in the
// same order whatever the batch).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"
#include "runtime/cpu/HostTensor.h"

namespace memra::gguf {
class GgufFile;
}
namespace memra::kernels::cpu {
class ThreadPool;
}

namespace memra::runtime {

class Communicator;

enum class WeightMode {
  kDequantizeAtLoad,  // every matrix decoded to f32 once (4 bytes/param of memory)
  kPerRow,            // matrices kept as stored, rows decoded inside each matmul
};

struct CpuExecutorOptions {
  int threads = 0;  // 0: kernels::cpu::ThreadPool::DefaultThreadCount()
  // Default measured in docs/ARCHITECTURE.md ("CPU executor"): per-row decode is as fast for
  // prefill and needs no f32 copy of the model, so it is the default.
  WeightMode weight_mode = WeightMode::kPerRow;
  // Accumulate wall time per op kind and function (ProfileReport()).
  bool profile = false;
  // Functions with a memory plan (passes/MemoryPlan.h): every argument and result lives at its
  // planned offset of one arena per function (NaN-poisoned when allocated), so a wrong plan
  // (two live values sharing memory) changes the results. Off: a fresh buffer per result.
  bool use_memory_plan = true;
  // Host memory the state (KV cache, recurrent state) may take, checked before it is allocated
  // (--max-host-memory); 0: what the machine has available.
  uint64_t memory_budget = 0;
  // A module partitioned for tensor parallelism (its `tp` attribute > 1) runs as one rank of a
  // group: this rank's collectives (all_reduce, all_gather) and, through its rank, the slices of
  // the sharded weights it binds. Not owned. Null: a module of tp 1.
  Communicator* communicator = nullptr;
};

// Called after every op for each of its named results (trace hooks, per-node comparisons).
using ValueObserver = std::function<void(const ir::Value& value, const HostTensor& tensor)>;

class CpuExecutor {
 public:
  // `module` and `file` must outlive the executor. Errors: a weight missing from the file or of
  // another type / shape than the module declares, a type the kernels cannot decode, an op
  // kind the executor does not implement.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const ir::Module& module, const gguf::GgufFile& file,
                                                             const CpuExecutorOptions& options = {});
  ~CpuExecutor();
  CpuExecutor(const CpuExecutor&) = delete;
  CpuExecutor& operator=(const CpuExecutor&) = delete;

  // Runs function `name` on `args` (types must match the signature up to symbols); returns its
  // results. State persists across calls.
  absl::StatusOr<std::vector<HostTensor>> Run(absl::string_view name, std::vector<HostTensor> args);

  // Zeroes every state buffer (KV caches, conv rings, delta-net states, position = 0).
  void ResetState();
  // Tokens seen (the position counter `pos`, or the first position-kind state); 0 if none.
  int64_t position() const;
  // KV cache rows (the context length); INT64_MAX when the module has no KV cache.
  int64_t context_capacity() const { return kv_capacity_; }
  const HostTensor* state(absl::string_view name) const;
  // Writes `bytes` bytes of `data` (zeros when null) into state @name at byte `offset`: the host's
  // part of a module lowered with slots (a slot's reset, block-table entries).
  absl::Status WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes);
  // The stash of runtime/Executor.h (host memory here).
  absl::Status AllocateStash(int64_t bytes);
  absl::Status CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                         bool to_stash);

  void set_observer(ValueObserver observer) { observer_ = std::move(observer); }
  int num_threads() const;
  WeightMode weight_mode() const { return options_.weight_mode; }
  // Bytes of weights decoded to f32 at load (0 in per-row mode except small vectors).
  uint64_t dense_weight_bytes() const { return dense_bytes_; }
  double load_seconds() const { return load_seconds_; }
  // With options.profile: per function, time per op kind (descending), calls and share.
  std::string ProfileReport() const;

  struct BoundWeight;
  struct Program;

 private:
  CpuExecutor(const ir::Module& module, const gguf::GgufFile& file, CpuExecutorOptions options);
  absl::Status BindWeights();
  absl::Status AllocateState();
  absl::StatusOr<const Program*> Prepare(absl::string_view name);

  const ir::Module& module_;
  const gguf::GgufFile& file_;
  CpuExecutorOptions options_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  absl::flat_hash_map<const ir::Value*, std::unique_ptr<BoundWeight>> weights_;
  absl::flat_hash_map<const ir::Value*, HostTensor> state_;
  std::vector<char> stash_;
  absl::flat_hash_map<std::string, std::unique_ptr<Program>> programs_;
  const ir::StateVar* position_state_ = nullptr;
  int64_t kv_capacity_ = INT64_MAX;
  uint64_t dense_bytes_ = 0;
  double load_seconds_ = 0;
  ValueObserver observer_;
  struct ProfileEntry {
    double seconds = 0;
    int64_t count = 0;
  };
  // (function, op mnemonic) -> time; and calls per function.
  std::map<std::pair<std::string, std::string>, ProfileEntry> profile_;
  std::map<std::string, ProfileEntry> profile_calls_;
};

}  // namespace memra::runtime
