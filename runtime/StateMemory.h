// The memory a module's state needs (KV cache, conv rings, delta-net states, counters), checked
// against the memory available before an executor allocates any of it, so an impossible context
// (`--ctx-size 100000000`) is an error naming the flag, never an abort inside an allocator.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"

namespace memra::runtime {

struct StateBytes {
  uint64_t kv = 0;         // attention KV caches
  uint64_t recurrent = 0;  // conv rings + delta-net states
  uint64_t other = 0;      // positions, rng, ...
  int64_t context = 0;     // the KV caches' rows (the context length), 0 without one
  uint64_t total() const { return kv + recurrent + other; }
};

// Errors: a symbolic state shape, or a size past 2^62 bytes (overflow-checked).
absl::StatusOr<StateBytes> StateBytesOf(const ir::Module& module);

// ResourceExhausted when `need` does not fit in `available` bytes of `where` ("host memory",
// "device memory"), naming the context length and --ctx-size.
// "KV cache 32.0 MiB + recurrent state 0.4 MiB" (the figure the load line prints).
std::string DescribeStateBytes(const StateBytes& bytes);

absl::Status CheckStateFits(const StateBytes& need, uint64_t available, absl::string_view where);

// The bytes one state takes on an executor (f32, i32, i64; KV caches also f16, bf16 or q8_0
// blocks), or Unimplemented naming the state, the executor ("CPU", "CUDA") and the type it does
// not keep, or InvalidArgument when a quantized state is not whole blocks.
absl::StatusOr<int64_t> StateStorageBytes(const ir::StateVar& state, absl::string_view executor);

// Host memory available to this process: MemAvailable of /proc/meminfo (else physical pages),
// capped by what an address-space limit (ulimit -v) leaves.
uint64_t AvailableHostMemory();

}  // namespace memra::runtime
