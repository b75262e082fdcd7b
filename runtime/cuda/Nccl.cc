#include "runtime/cuda/Nccl.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  const std::vector<std::string> cands = codegen::CudaLibraryCandidates("libnccl.so.2", "nccl/lib");
  void* h = nullptr;
  std::string from;
  for (const std::string& c : cands)
    if ((h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
      from = c;
      break;
    }
  if (h == nullptr) {
    failure = absl::NotFoundError(absl::StrCat("NCCL (libnccl.so.2) not found (tried ", absl::StrJoin(cands, ", "),
                                               "); a tensor-parallel run on GPUs needs it"));
    return failure;
  }
  auto* a = new Api();
  std::vector<std::string> missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (fn == nullptr) missing.push_back(name);
  };
  sym(a->GetVersion, "ncclGetVersion");
  sym(a->GetUniqueId, "ncclGetUniqueId");
  sym(a->CommInitRank, "ncclCommInitRank");
  sym(a->CommDestroy, "ncclCommDestroy");
  sym(a->CommAbort, "ncclCommAbort");
  sym(a->AllReduce, "ncclAllReduce");
  sym(a->AllGather, "ncclAllGather");
  sym(a->GetErrorString, "ncclGetErrorString");
  sym(a->GetLastError, "ncclGetLastError");
  if (!missing.empty()) {
    failure = absl::InternalError(absl::StrCat(from, " lacks ", absl::StrJoin(missing, ", ")));
    return failure;
  }
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
