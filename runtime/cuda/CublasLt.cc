#include "runtime/cuda/CublasLt.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/DynamicLibrary.h"
#include "codegen/Nvrtc.h"
#include "ir/StatusMacros.h"
#include "runtime/cuda/InitcheckMarks.h"

namespace memra::runtime::cuda {

namespace {
using Status = int;  // cublasStatus_t
using Handle = void*;
using Desc = void*;
using Layout = void*;
using Pref = void*;
// Values from cublasLt.h / cublas_api.h / library_types.h (checked in tests/cuda/CudaApi_test.cc).
constexpr int kDescTransA = 3, kDescTransB = 4;
constexpr int kPrefMaxWorkspace = 1;
constexpr int kOpN = 0, kOpT = 1;
constexpr int kCompute32F = 68;
constexpr int kR32F = 0, kR16F = 2, kR16BF = 14;
constexpr int kConfigSplitK = 2, kConfigReduction = 3;  // cublasLtMatmulAlgoConfigAttributes_t
// The rows the pinned algorithm of a weight shape is chosen at (row_invariant): the step ladder's
// largest prompt bucket, where a product's time goes.
constexpr int64_t kPinnedRows = 512;
}  // namespace

using Algo = CublasLt::Algo;
using HeuristicResult = CublasLt::HeuristicResult;

struct CublasLt::Api {
  std::string library;
  Status (*Create)(Handle*);
  Status (*Destroy)(Handle);
  Status (*DescCreate)(Desc*, int, int);
  Status (*DescDestroy)(Desc);
  Status (*DescSetAttribute)(Desc, int, const void*, size_t);
  Status (*LayoutCreate)(Layout*, int, uint64_t, uint64_t, int64_t);
  Status (*LayoutDestroy)(Layout);
  Status (*PrefCreate)(Pref*);
  Status (*PrefDestroy)(Pref);
  Status (*PrefSetAttribute)(Pref, int, const void*, size_t);
  Status (*GetHeuristic)(Handle, Desc, Layout, Layout, Layout, Layout, Pref, int, HeuristicResult*, int*);
  Status (*Matmul)(Handle, Desc, const void*, const void*, Layout, const void*, Layout, const void*, const void*,
                   Layout, void*, Layout, const Algo*, void*, size_t, CUstream);
  const char* (*GetStatusString)(Status);
  Status (*AlgoConfigGetAttribute)(const Algo*, int, void*, size_t, size_t*);
  Status (*AlgoConfigSetAttribute)(Algo*, int, const void*, size_t);
  Status (*AlgoCheck)(Handle, Desc, Layout, Layout, Layout, Layout, const Algo*, HeuristicResult*);
};

struct CublasLt::Algo {
  uint64_t data[8];
};
struct CublasLt::HeuristicResult {
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};

struct CublasLt::Plan {
  Desc desc = nullptr;
  Layout a = nullptr, b = nullptr, c = nullptr;
  std::vector<HeuristicResult> algos;  // the heuristic's, best first; Matmul runs algos[0]
};

namespace {
absl::StatusOr<const CublasLt::Api*> LoadApi() {
  static std::mutex mu;
  static CublasLt::Api* api = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (api != nullptr) return api;
  std::vector<std::string> cands = codegen::CudaLibraryCandidates("libcublasLt.so.13", "cu13/lib");
  for (const std::string& c : codegen::CudaLibraryCandidates("libcublasLt.so.13", "cublas/lib")) cands.push_back(c);
  MEMRA_ASSIGN_OR_RETURN(codegen::DynamicLibrary lib, codegen::DynamicLibrary::Open(cands, "cuBLASLt", ""));
  auto* a = new CublasLt::Api();
  a->library = lib.path();
  lib.Bind(a->Create, "cublasLtCreate");
  lib.Bind(a->Destroy, "cublasLtDestroy");
  lib.Bind(a->DescCreate, "cublasLtMatmulDescCreate");
  lib.Bind(a->DescDestroy, "cublasLtMatmulDescDestroy");
  lib.Bind(a->DescSetAttribute, "cublasLtMatmulDescSetAttribute");
  lib.Bind(a->LayoutCreate, "cublasLtMatrixLayoutCreate");
  lib.Bind(a->LayoutDestroy, "cublasLtMatrixLayoutDestroy");
  lib.Bind(a->PrefCreate, "cublasLtMatmulPreferenceCreate");
  lib.Bind(a->PrefDestroy, "cublasLtMatmulPreferenceDestroy");
  lib.Bind(a->PrefSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  lib.Bind(a->GetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  lib.Bind(a->Matmul, "cublasLtMatmul");
  lib.Bind(a->GetStatusString, "cublasLtGetStatusString");
  lib.Bind(a->AlgoConfigGetAttribute, "cublasLtMatmulAlgoConfigGetAttribute");
  lib.Bind(a->AlgoConfigSetAttribute, "cublasLtMatmulAlgoConfigSetAttribute");
  lib.Bind(a->AlgoCheck, "cublasLtMatmulAlgoCheck");
  MEMRA_RETURN_IF_ERROR(lib.Check());
  api = a;
  return api;
}

absl::Status LtCheck(const CublasLt::Api* a, Status s, absl::string_view what) {
  if (s == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cuBLASLt ", what, ": ", a->GetStatusString ? a->GetStatusString(s) : "", " (status ", s, ")"));
}
}  // namespace

absl::StatusOr<std::unique_ptr<CublasLt>> CublasLt::Create(size_t workspace_bytes, bool row_invariant) {
  MEMRA_ASSIGN_OR_RETURN(const CudaDriver* d, CudaDriver::Get());
  std::unique_ptr<CublasLt> c(new CublasLt());
  c->row_invariant_ = row_invariant;
  MEMRA_ASSIGN_OR_RETURN(c->api_, LoadApi());
  MEMRA_RETURN_IF_ERROR(LtCheck(c->api_, c->api_->Create(&c->handle_), "create"));
  c->workspace_bytes_ = workspace_bytes;
  MEMRA_RETURN_IF_ERROR(CuCheck(d->cuMemAlloc(&c->workspace_, workspace_bytes), "cuBLASLt workspace"));
  return c;
}

CublasLt::~CublasLt() {
  if (api_ == nullptr) return;
  for (auto& [k, p] : plans_) {
    api_->LayoutDestroy(p->a);
    api_->LayoutDestroy(p->b);
    api_->LayoutDestroy(p->c);
    api_->DescDestroy(p->desc);
  }
  if (handle_ != nullptr) api_->Destroy(handle_);
  if (workspace_ != 0) {
    auto d = CudaDriver::Get();
    if (d.ok()) (*d)->cuMemFree(workspace_);
  }
}

const std::string& CublasLt::library() const { return api_->library; }

absl::StatusOr<CublasLt::Plan*> CublasLt::PlanFor(int64_t M, int64_t N, int64_t K, ir::DType wtype, int candidates) {
  const int t = wtype == ir::DType::kF32    ? kR32F
                : wtype == ir::DType::kF16  ? kR16F
                : wtype == ir::DType::kBF16 ? kR16BF
                                            : -1;
  if (t < 0) return absl::InvalidArgumentError(absl::StrCat("cuBLASLt matmul: weight type ", ir::DTypeName(wtype)));
  std::lock_guard<std::mutex> lock(mu_);
  MEMRA_ASSIGN_OR_RETURN(Plan * plan, DescribedPlan(M, N, K, t));
  if (row_invariant_) {
    // One algorithm for every M of a weight shape (sequences.md §8): the heuristic's first at
    // kPinnedRows rows that splits no K, so each output element keeps one accumulator along K
    // in one order whatever rows run beside it.
    if (plan->algos.empty()) {
      auto& pin = pinned_[{N, K, t}];
      if (!pin) {
        MEMRA_ASSIGN_OR_RETURN(Plan * ref, DescribedPlan(kPinnedRows, N, K, t));
        MEMRA_ASSIGN_OR_RETURN(std::vector<HeuristicResult> found, Heuristic(*ref, 32, kPinnedRows, N, K, wtype));
        auto unsplit = [&](const Algo& algo) {
          uint32_t split = 0, reduction = 0;
          size_t written = 0;
          return api_->AlgoConfigGetAttribute(&algo, kConfigSplitK, &split, sizeof(split), &written) == 0 &&
                 api_->AlgoConfigGetAttribute(&algo, kConfigReduction, &reduction, sizeof(reduction), &written) == 0 &&
                 split <= 1 && reduction == 0;
        };
        for (const HeuristicResult& h : found)
          if (unsplit(h.algo)) {
            pin = std::make_unique<HeuristicResult>(h);
            break;
          }
        // Few weight rows (the 9B's 32-row ssm_alpha / ssm_beta) get only split-K candidates: the
        // best one with its K unsplit, if cuBLASLt accepts it so.
        for (size_t i = 0; !pin && i < found.size(); ++i) {
          HeuristicResult h = found[i];
          const uint32_t one = 1, none = 0;
          if (api_->AlgoConfigSetAttribute(&h.algo, kConfigSplitK, &one, sizeof(one)) != 0 ||
              api_->AlgoConfigSetAttribute(&h.algo, kConfigReduction, &none, sizeof(none)) != 0 || !unsplit(h.algo))
            continue;
          HeuristicResult checked{};
          if (api_->AlgoCheck(handle_, ref->desc, ref->a, ref->b, ref->c, ref->c, &h.algo, &checked) != 0 ||
              checked.workspaceSize > workspace_bytes_)
            continue;
          h.workspaceSize = checked.workspaceSize;
          pin = std::make_unique<HeuristicResult>(h);
        }
        if (!pin)
          return absl::InternalError(absl::StrCat("cuBLASLt: no algorithm without split-K for N=", N, " K=", K, " ",
                                                  ir::DTypeName(wtype), " (decode class exact)"));
      }
      // The pin was chosen at kPinnedRows: check once that it runs at this M too, so a shape it
      // cannot take fails here, naming the pin, not later as a bare matmul error.
      HeuristicResult checked{};
      const Status s = api_->AlgoCheck(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, &pin->algo, &checked);
      if (s != 0 || checked.workspaceSize > workspace_bytes_)
        return absl::InternalError(absl::StrCat(
            "cuBLASLt: the algorithm pinned at M=", kPinnedRows, " for N=", N, " K=", K, " ", ir::DTypeName(wtype),
            " (decode class exact) does not run at M=", M,
            s != 0 ? absl::StrCat(": ", api_->GetStatusString ? api_->GetStatusString(s) : "", " (status ", s, ")")
                   : absl::StrCat(": it needs ", checked.workspaceSize, " bytes of workspace, ", workspace_bytes_,
                                  " are set aside")));
      plan->algos = {*pin};
    }
    return plan;
  }
  if (static_cast<int>(plan->algos.size()) < candidates) {
    MEMRA_ASSIGN_OR_RETURN(plan->algos, Heuristic(*plan, candidates, M, N, K, wtype));
  }
  return plan;
}

absl::StatusOr<CublasLt::Plan*> CublasLt::DescribedPlan(int64_t M, int64_t N, int64_t K, int t) {
  const Api* a = api_;
  auto& slot = plans_[{M, N, K, t}];
  if (slot) return slot.get();
  auto p = std::make_unique<Plan>();
  // Column-major view: C^T[N, M] = op(A) . B with A = W (K x N col-major, transposed),
  // B = x (K x M col-major), C = y (N x M col-major, ld N).
  MEMRA_RETURN_IF_ERROR(LtCheck(a, a->DescCreate(&p->desc, kCompute32F, kR32F), "matmul desc"));
  const int32_t ta = kOpT, tb = kOpN;
  MEMRA_RETURN_IF_ERROR(LtCheck(a, a->DescSetAttribute(p->desc, kDescTransA, &ta, sizeof(ta)), "transa"));
  MEMRA_RETURN_IF_ERROR(LtCheck(a, a->DescSetAttribute(p->desc, kDescTransB, &tb, sizeof(tb)), "transb"));
  MEMRA_RETURN_IF_ERROR(LtCheck(a, a->LayoutCreate(&p->a, t, K, N, K), "layout A"));
  MEMRA_RETURN_IF_ERROR(LtCheck(a, a->LayoutCreate(&p->b, t, K, M, K), "layout B"));
  MEMRA_RETURN_IF_ERROR(LtCheck(a, a->LayoutCreate(&p->c, kR32F, N, M, N), "layout C"));
  slot = std::move(p);
  return slot.get();
}

absl::StatusOr<std::vector<CublasLt::HeuristicResult>> CublasLt::Heuristic(const Plan& plan, int candidates, int64_t M,
                                                                           int64_t N, int64_t K, ir::DType wtype) {
  const Api* a = api_;
  Pref pref = nullptr;
  MEMRA_RETURN_IF_ERROR(LtCheck(a, a->PrefCreate(&pref), "preference"));
  const uint64_t ws = workspace_bytes_;
  a->PrefSetAttribute(pref, kPrefMaxWorkspace, &ws, sizeof(ws));
  std::vector<HeuristicResult> found_algos(static_cast<size_t>(std::max(candidates, 1)));
  int found = 0;
  Status s = a->GetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                             static_cast<int>(found_algos.size()), found_algos.data(), &found);
  a->PrefDestroy(pref);
  if (s != 0 || found == 0)
    return absl::InternalError(absl::StrCat("cuBLASLt found no algorithm for M=", M, " N=", N, " K=", K, " ",
                                            ir::DTypeName(wtype), " (status ", s, ")"));
  found_algos.resize(static_cast<size_t>(found));
  return found_algos;
}

absl::Status CublasLt::Matmul(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t M, int64_t N, int64_t K,
                              ir::DType wtype, CUstream stream) {
  return MatmulWith(0, x, w, y, M, N, K, wtype, stream);
}

absl::StatusOr<int> CublasLt::Candidates(int64_t M, int64_t N, int64_t K, ir::DType wtype, int max) {
  MEMRA_ASSIGN_OR_RETURN(Plan * plan, PlanFor(M, N, K, wtype, max));
  return static_cast<int>(plan->algos.size());
}

absl::Status CublasLt::MatmulWith(int candidate, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t M, int64_t N,
                                  int64_t K, ir::DType wtype, CUstream stream) {
  if (M == 0) return absl::OkStatus();
  MEMRA_ASSIGN_OR_RETURN(Plan * plan, PlanFor(M, N, K, wtype, 1));
  Algo algo;  // a copy: Candidates may replace the plan's list while this call runs
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (candidate < 0 || candidate >= static_cast<int>(plan->algos.size()))
      return absl::InvalidArgumentError(absl::StrCat("cuBLASLt matmul: no candidate ", candidate));
    algo = plan->algos[static_cast<size_t>(candidate)].algo;
  }
  const Api* a = api_;
  const float alpha = 1.0f, beta = 0.0f;
  MEMRA_RETURN_IF_ERROR(
      LtCheck(a,
              a->Matmul(handle_, plan->desc, &alpha, reinterpret_cast<const void*>(w), plan->a,
                        reinterpret_cast<const void*>(x), plan->b, &beta, reinterpret_cast<const void*>(y), plan->c,
                        reinterpret_cast<void*>(y), plan->c, &algo, reinterpret_cast<void*>(workspace_),
                        workspace_bytes_, stream),
              absl::StrCat("matmul M=", M, " N=", N, " K=", K)));
  // y [M, N] f32, every element written: said so to compute-sanitizer's initcheck, which does not
  // see cuBLASLt's stores.
  MarkWrittenForInitcheck(y, static_cast<size_t>(M * N) * sizeof(float), reinterpret_cast<void*>(stream));
  return absl::OkStatus();
}

}  // namespace memra::runtime::cuda
