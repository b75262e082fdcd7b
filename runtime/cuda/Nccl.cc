#include "runtime/cuda/Nccl.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/DynamicLibrary.h"
#include "codegen/Nvrtc.h"
#include "ir/StatusMacros.h"

namespace memra::runtime::cuda {

namespace {
using Result = int;  // ncclResult_t
using Comm = void*;  // ncclComm_t
struct RawId {
  char internal[128];
};
// Values from nccl.h (2.x; stable across its releases).
constexpr int kSuccess = 0;
constexpr int kInProgress = 7;
constexpr int kFloat32 = 7;  // ncclFloat32
constexpr int kSum = 0;      // ncclSum
}  // namespace

struct Nccl::Api {
  Result (*GetVersion)(int*);
  Result (*GetUniqueId)(RawId*);
  Result (*CommInitRank)(Comm*, int, RawId, int);
  Result (*CommDestroy)(Comm);
  Result (*CommAbort)(Comm);
  Result (*AllReduce)(const void*, void*, size_t, int, int, Comm, CUstream);
  Result (*AllGather)(const void*, void*, size_t, int, Comm, CUstream);
  const char* (*GetErrorString)(Result);
  const char* (*GetLastError)(Comm);
};

absl::StatusOr<const Nccl*> Nccl::Get() {
  static std::mutex mu;
  static Nccl* loaded = nullptr;
  static absl::Status failure;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded != nullptr) return loaded;
  if (!failure.ok()) return failure;
  // The toolkit's copy, or the nvidia-nccl wheel's (nvidia/nccl/lib; cu13 wheels may use cu13/lib).
  std::vector<std::string> cands = codegen::CudaLibraryCandidates("libnccl.so.2", "nccl/lib");
  for (const std::string& c : codegen::CudaLibraryCandidates("libnccl.so.2", "cu13/lib"))
    if (std::find(cands.begin(), cands.end(), c) == cands.end()) cands.push_back(c);
  absl::StatusOr<codegen::DynamicLibrary> lib =
      codegen::DynamicLibrary::Open(cands, "NCCL (libnccl.so.2)", "a tensor-parallel run on GPUs needs it");
  if (!lib.ok()) {
    failure = lib.status();
    return failure;
  }
  auto* a = new Api();
  lib->Bind(a->GetVersion, "ncclGetVersion");
  lib->Bind(a->GetUniqueId, "ncclGetUniqueId");
  lib->Bind(a->CommInitRank, "ncclCommInitRank");
  lib->Bind(a->CommDestroy, "ncclCommDestroy");
  lib->Bind(a->CommAbort, "ncclCommAbort");
  lib->Bind(a->AllReduce, "ncclAllReduce");
  lib->Bind(a->AllGather, "ncclAllGather");
  lib->Bind(a->GetErrorString, "ncclGetErrorString");
  lib->Bind(a->GetLastError, "ncclGetLastError");
  if (absl::Status st = lib->Check(); !st.ok()) {
    failure = st;
    return failure;
  }
  const std::string from = lib->path();
  auto* n = new Nccl();
  n->api_ = a;
  n->library_ = from;
  if (a->GetVersion(&n->version_) != kSuccess) {
    failure = absl::InternalError(absl::StrCat(from, ": ncclGetVersion failed"));
    return failure;
  }
  loaded = n;
  return loaded;
}

absl::StatusOr<NcclId> Nccl::UniqueId() const {
  RawId id;
  const Result r = api_->GetUniqueId(&id);
  if (r != kSuccess)
    return absl::InternalError(absl::StrCat("ncclGetUniqueId: ", api_->GetErrorString(r), " (", r, ")"));
  NcclId out;
  std::copy(std::begin(id.internal), std::end(id.internal), out.begin());
  return out;
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(const NcclId& id, int nranks, int rank) {
  MEMRA_ASSIGN_OR_RETURN(const Nccl* nccl, Nccl::Get());
  RawId uid;
  std::copy(id.begin(), id.end(), uid.internal);
  Comm comm = nullptr;
  const Result r = nccl->api().CommInitRank(&comm, nranks, uid, rank);
  if (r != kSuccess)
    return absl::InternalError(absl::StrCat("ncclCommInitRank (rank ", rank, " of ", nranks,
                                            "): ", nccl->api().GetErrorString(r), " (", r, ")"));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(nccl, comm, rank, nranks));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) nccl_->api().CommDestroy(comm_);
}

void NcclCommunicator::Abort() {
  if (comm_ != nullptr) nccl_->api().CommAbort(comm_);
  comm_ = nullptr;
}

absl::Status NcclCommunicator::Check(int result, const char* what) const {
  if (result == kSuccess || result == kInProgress) return absl::OkStatus();
  const char* last = comm_ != nullptr ? nccl_->api().GetLastError(comm_) : nullptr;
  return absl::InternalError(absl::StrCat(what, " on rank ", rank_, " of ", size_, ": ",
                                          nccl_->api().GetErrorString(result), last && *last ? " (" : "",
                                          last ? last : "", last && *last ? ")" : ""));
}

absl::Status NcclCommunicator::AllReduceSum(uint64_t send, uint64_t recv, int64_t count, CUstream stream) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("all_reduce: the NCCL communicator was aborted");
  return Check(nccl_->api().AllReduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv),
                                      static_cast<size_t>(count), kFloat32, kSum, comm_, stream),
               "ncclAllReduce");
}

absl::Status NcclCommunicator::AllGather(uint64_t send, uint64_t recv, int64_t count, CUstream stream) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("all_gather: the NCCL communicator was aborted");
  return Check(nccl_->api().AllGather(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv),
                                      static_cast<size_t>(count), kFloat32, comm_, stream),
               "ncclAllGather");
}

}  // namespace memra::runtime::cuda
