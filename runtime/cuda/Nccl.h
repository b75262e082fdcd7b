// NCCL, loaded at run time (dlopen of libnccl.so.2, as cuBLASLt and NVRTC are), for the collectives
// of a tensor-parallel module (ir/Ops.def all_reduce / all_gather; docs/design/tensor-parallel.md):
// binaries start and run single-GPU work without it, and a split run says clearly when it is
// missing. One NcclCommunicator per rank, made on the rank's thread with its device's context
// current, from the standard bootstrap: rank 0's ncclGetUniqueId shared with every rank, then
// ncclCommInitRank on each.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/cuda/CudaDriver.h"

namespace memra::runtime::cuda {

// ncclUniqueId: the bootstrap handle every rank of one communicator is created from.
using NcclId = std::array<char, 128>;

class Nccl {
 public:
  struct Api;
  // The library, loaded once per process; NotFound naming the paths tried.
  static absl::StatusOr<const Nccl*> Get();
  // ncclGetVersion's code, e.g. 22809 for 2.28.9.
  int version() const { return version_; }
  const std::string& library() const { return library_; }
  absl::StatusOr<NcclId> UniqueId() const;
  const Api& api() const { return *api_; }

 private:
  const Api* api_ = nullptr;
  int version_ = 0;
  std::string library_;
};

class NcclCommunicator {
 public:
  // Rank `rank` of `nranks` on the calling thread's current CUDA context (its device); blocks
  // until every rank has joined.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const NcclId& id, int nranks, int rank);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // recv[i] = the sum over the ranks of send[i] (f32, count elements), enqueued on `stream`.
  absl::Status AllReduceSum(uint64_t send, uint64_t recv, int64_t count, CUstream stream);
  // recv[r * count + i] = rank r's send[i] (f32), enqueued on `stream`.
  absl::Status AllGather(uint64_t send, uint64_t recv, int64_t count, CUstream stream);
  // Stops the communicator's outstanding work (another rank failed); it cannot be used after.
  void Abort();

 private:
  NcclCommunicator(const Nccl* nccl, void* comm, int rank, int size)
      : nccl_(nccl), comm_(comm), rank_(rank), size_(size) {}
  absl::Status Check(int result, const char* what) const;

  const Nccl* nccl_;
  void* comm_;
  int rank_, size_;
};

}  // namespace memra::runtime::cuda
