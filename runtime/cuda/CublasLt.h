// cuBLASLt, loaded at run time (dlopen of libcublasLt.so.13), for the matmuls:
//   y[M, N] (f32) = x[M, K] . W[N, K]^T, W f32 / f16 / bf16 (x already in W's type), f32 accumulate.
// f32 x f32 runs with CUBLAS_COMPUTE_32F (no TF32: the f32 model matches the CPU executor).
// Matmul descriptors and the heuristic's algorithm are cached per (M, N, K, type). Row-invariant
// (the exact decode class, kernels/cuda/DecodeClass.h): one algorithm per (N, K, type) for every M,
// the heuristic's first at 512 rows without split-K, so row i of y does not depend on M.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/DType.h"
#include "runtime/cuda/CudaDriver.h"

namespace memra::runtime::cuda {

class CublasLt {
 public:
  // Loads the library (once per process) and creates a handle + workspace on the current context.
  static absl::StatusOr<std::unique_ptr<CublasLt>> Create(size_t workspace_bytes = 32u << 20,
                                                          bool row_invariant = false);
  ~CublasLt();

  // y = x . w^T with x [M, K] (row-major, `wtype`), w [N, K] (row-major, `wtype`), y [M, N] f32.
  absl::Status Matmul(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t M, int64_t N, int64_t K, ir::DType wtype,
                      CUstream stream);
  // The heuristic's first `max` algorithms for a shape, best first (memra-kernel-bench --section
  // gemm times each): how many it returned, >= 1 (row-invariant: 1, the pinned one). Matmul runs
  // candidate 0; MatmulWith any of them.
  absl::StatusOr<int> Candidates(int64_t M, int64_t N, int64_t K, ir::DType wtype, int max);
  absl::Status MatmulWith(int candidate, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t M, int64_t N, int64_t K,
                          ir::DType wtype, CUstream stream);
  const std::string& library() const;
  size_t workspace_bytes() const { return workspace_bytes_; }
  bool row_invariant() const { return row_invariant_; }

  struct Api;
  struct Plan;
  struct Algo;
  struct HeuristicResult;

 private:
  CublasLt() = default;
  const Api* api_ = nullptr;
  void* handle_ = nullptr;
  CUdeviceptr workspace_ = 0;
  size_t workspace_bytes_ = 0;
  std::mutex mu_;
  bool row_invariant_ = false;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, std::unique_ptr<Plan>> plans_;
  std::map<std::tuple<int64_t, int64_t, int>, std::unique_ptr<HeuristicResult>> pinned_;  // row_invariant
  absl::StatusOr<Plan*> PlanFor(int64_t M, int64_t N, int64_t K, ir::DType wtype, int candidates);
  // The descriptors of (M, N, K, storage t), made once (mu_ held).
  absl::StatusOr<Plan*> DescribedPlan(int64_t M, int64_t N, int64_t K, int t);
  absl::StatusOr<std::vector<HeuristicResult>> Heuristic(const Plan& plan, int candidates, int64_t M, int64_t N,
                                                         int64_t K, ir::DType wtype);
};

}  // namespace memra::runtime::cuda
