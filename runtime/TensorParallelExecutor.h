// A module partitioned by shard-tensor-parallel{tp=N} run as N ranks behind the one Executor
// interface Session, memra run / bench and the server drive (docs/design/tensor-parallel.md):
// every call runs on every rank at once, rank r on its own thread with its own executor (its
// slices of the weights, its shards of the state), the ranks meeting in the module's all_reduce /
// all_gather ops; the results are rank 0's (every rank holds the same). One process drives all
// ranks: one tokenizer, scheduler and server, no bootstrap between processes.
//
// CPU ranks meet through runtime/ThreadCommunicator.h (exact, deterministic: the split math
// checked against the unsplit module). CUDA ranks: rank r on GPU (options.cuda.device + r), each
// uploading its slices, meeting through NCCL communicators made by the standard bootstrap
// (runtime/cuda/Nccl.h). A failing rank aborts the group (and the NCCL communicators: the
// executor cannot run again), so no rank waits forever for it.
#pragma once

#include <memory>
#include <vector>

#include "runtime/Executor.h"
#include "runtime/ThreadCommunicator.h"

namespace memra::runtime {

// `module` has tp > 1 (its attribute); `module` and `file` must outlive the executor.
absl::StatusOr<std::unique_ptr<Executor>> CreateTensorParallelExecutor(Backend backend, const ir::Module& module,
                                                                       const gguf::GgufFile& file,
                                                                       const ExecutorOptions& options);

}  // namespace memra::runtime
