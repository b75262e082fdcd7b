// The device memory a CUDA executor holds, by kind: what `memra run` (its load line) and `memra
// bench` report, and what the executor checks against the free device memory before it uploads
// anything, so a model that does not fit is one error with the numbers, never an out-of-memory
// half way through the upload.
#pragma once

#include <optional>

#include "runtime/WeightShard.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::gguf {
class GgufFile;
struct TensorInfo;
}  // namespace memra::gguf

namespace memra::runtime {

struct DeviceMemoryBytes {
  uint64_t weights = 0;      // matrices in their layouts (blocks: the GGUF tensor bytes) + f32 value weights
  uint64_t kv_cache = 0;     // attention KV caches
  uint64_t recurrent = 0;    // conv rings + delta-net states
  uint64_t other_state = 0;  // position counters, the decode loop's token ring
  uint64_t arenas = 0;       // the programs' arenas (activations and per-step scratch)
  uint64_t workspace = 0;    // the dequantization workspace (a matrix in blocks as bf16) + cuBLASLt's
  uint64_t total() const { return weights + kv_cache + recurrent + other_state + arenas + workspace; }
};

// "weights 5.21 GiB, KV cache 512.0 MiB, recurrent state 48.0 MiB, arenas 96.0 MiB, workspace 2.00 GiB
// (total 7.9 GiB)".
std::string DescribeDeviceMemory(const DeviceMemoryBytes& bytes);

// ResourceExhausted when `need` exceeds `free_bytes` of `device` (its name), giving every kind and
// what to change (--ctx-size for the state, a smaller model or another GPU for the weights).
absl::Status CheckDeviceMemoryFits(const DeviceMemoryBytes& need, uint64_t free_bytes, absl::string_view device);

// The CUDA executor's device decode loop token ring (i32[1024], its write index and the greedy
// pick's non-finite record: 4 more words).
inline constexpr uint64_t kDecodeTokenRingBytes = (1024 + 4 + 4 + 3 * 128) * 4;

// How one weight of a module will live on the device, decided before anything is uploaded.
struct PlannedWeight {
  const ir::Weight* weight = nullptr;
  const gguf::TensorInfo* tensor = nullptr;
  const kernels::cuda::WeightLayout* layout = nullptr;  // a matrix use: its layout, else nullptr
  int64_t rows = 0, cols = 0;
  uint64_t matrix_bytes = 0;  // the layout's bytes (as stored / blocks: the tensor bytes)
  uint64_t value_bytes = 0;   // a value use (norms, biases, conv kernels): the f32 copy
  // A weight of a tensor-parallel module: the rank's slice of `tensor` is what is uploaded
  // (runtime/WeightShard.h, cut at upload time); rows, cols and the bytes above are the slice's.
  std::optional<WeightShard> shard;
};
// Every weight of `module` from `file` with its device layout under `weights`. Errors (before any
// device work): a tensor missing or typed otherwise than the module says, and a matrix whose type
// has no layout in that mode, naming the tensor, its type and --weights bf16 where that holds it.
absl::StatusOr<std::vector<PlannedWeight>> PlanWeights(const ir::Module& module, const gguf::GgufFile& file,
                                                       kernels::cuda::WeightMode weights);

// What a CUDA executor of `module` needs, before it allocates anything: the planned weights, the
// state (KV cache, recurrent state, counters + the decode loop's token ring), the units' workspace
// (kernels/cuda/GpuOpRegistry.h WorkspaceBytesOf) and the largest memory-planned arena (at least
// one program runs; others are laid out when first called). Not counted: cuBLASLt's workspace.
absl::StatusOr<DeviceMemoryBytes> PlannedDeviceMemory(const ir::Module& module,
                                                      const std::vector<PlannedWeight>& weights,
                                                      const kernels::cuda::Target& target,
                                                      kernels::cuda::WeightMode mode);

}  // namespace memra::runtime
