// The collectives a tensor-parallel rank runs (ir/Ops.def all_reduce, all_gather): one object per
// rank, each rank calling the same collectives in the same order with the same sizes. Two
// implementations: runtime/ThreadCommunicator.h (ranks as threads of one process: the CPU
// executor's simulation of a split run, exact and deterministic) and NCCL's on the GPUs
// (docs/design/tensor-parallel.md).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace memra::runtime {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[i] = the sum over the ranks of their data[i], for i < n, every rank receiving the same
  // sum.
  virtual absl::Status AllReduceSum(float* data, int64_t n) = 0;
  // out[r * n + i] = rank r's in[i]: the ranks' blocks concatenated in rank order.
  virtual absl::Status AllGather(const float* in, int64_t n, float* out) = 0;
};

}  // namespace memra::runtime
