// The CUDA executor's internal types, shared by its implementation files (not a public API):
//   CudaExecutor.cc    device, weight upload, state, program building (kernels, arena layout,
//                      segments), Run, profile report
//   CudaGraphs.cc      graph capture/replay of segments and the device greedy decode loop
//   CudaSteps.cc       EnqueueStep: the launches of every op kind
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codegen/KernelSelect.h"
#include "ir/Function.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"

namespace memra::runtime {

// Names the implementation files use unqualified (this header is included by them alone).
using cuda::CUdeviceptr;
using cuda::CUfunction;
using cuda::CuCheck;
using ir::DType;
using ir::Op;
using ir::OpKind;

struct CudaExecutor::DeviceWeight {
  const ir::Weight* weight = nullptr;
  cuda::DeviceBuffer matrix;   // device storage of matrix uses (f32 / f16 / bf16)
  DType matrix_dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
  cuda::DeviceBuffer values;   // f32 values for element consumers (norms, conv, biases)
  // Q8_0 matrices also keep their blocks for the one-token GEMV (kernels/cuda/Gemv.cu), repacked
  // so loads stay 16-byte aligned: int8 values [rows, cols] and one f32 scale per 32 values.
  cuda::DeviceBuffer q8, q8_scales;
};

namespace cuda_exec {

struct ResolvedLaunch {
  codegen::Launch spec;
  CUfunction fn = nullptr;
};

// A value's place in the arena (or an alias of another's).
struct Slot {
  int64_t offset = -1;
  int64_t bytes = 0;
};

struct Step {
  const Op* op = nullptr;
  codegen::OpShapes shapes;  // at T = bucket
  std::vector<ResolvedLaunch> launches;
  bool gemm = false;
  bool gemv = false;
  codegen::StepScratch scratch;
  int64_t scratch_offset = -1;  // the step's scratch: the GEMM's 16-bit activation copy first,
  int64_t aux_offset = -1;      // then an f32 temporary of fused ops (matmul_swiglu's gate
                                // product, qk_norm_rope's normed q / k)
  int64_t scratch_bytes = 0;
};

inline int64_t ElemBytes(DType d) { return d == DType::kI64 || d == DType::kF64 ? 8 : d == DType::kF16 || d == DType::kBF16 ? 2 : 4; }

inline int64_t Numel(llvm::ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Kernel arguments, packed as cuLaunchKernel wants them (pointers to each value).
class KernelArgs {
 public:
  template <typename T>
  KernelArgs& Add(T v) {
    static_assert(sizeof(T) <= 8);
    std::memcpy(store_[n_].data(), &v, sizeof(T));
    ptrs_[n_] = store_[n_].data();
    ++n_;
    return *this;
  }
  void** ptrs() { return ptrs_.data(); }

 private:
  std::array<std::array<uint8_t, 8>, 24> store_{};
  std::array<void*, 24> ptrs_{};
  int n_ = 0;
};

inline absl::StatusOr<llvm::SmallVector<int64_t, 4>> ConcreteShape(const ir::Value* v, const ir::SymbolBindings& bindings) {
  llvm::SmallVector<int64_t, 4> out;
  for (const ir::Dim& d : v->shape().dims()) {
    auto x = d.Evaluate(bindings);
    if (!x) return absl::InvalidArgumentError(absl::StrCat("unbound symbol ", d.ToString()));
    out.push_back(*x);
  }
  return out;
}

// Token ring of the device decode loop: capacity (ids) + one write index.
constexpr int64_t kTokenRing = 1024;

inline absl::Status OpError(const Op& op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("cuda executor: ", op.Summary(), ": ", msg));
}

}  // namespace cuda_exec
using namespace cuda_exec;  // NOLINT: the implementation files share these names

// A run of steps executed together: one CUDA graph when capturable (instantiated on the
// program's second call), else eagerly op by op.
struct SegmentRun {
  size_t begin = 0, end = 0;  // steps [begin, end)
  bool capturable = false;
  std::string reason;         // why not (from the IR's segment or passes/Capture.h)
  cuda::CUgraphExec exec = nullptr;
};

struct CudaExecutor::Program {
  ~Program() {
    if (driver == nullptr) return;
    for (SegmentRun& r : segments)
      if (r.exec) driver->cuGraphExecDestroy(r.exec);
    if (greedy_exec) driver->cuGraphExecDestroy(greedy_exec);
    for (cuda::CUevent e : events) driver->cuEventDestroy(e);
  }
  const cuda::CudaDriver* driver = nullptr;
  const ir::Function* fn = nullptr;
  int64_t bucket = 1;
  int64_t calls = 0;  // completed Run calls (graphs are captured from the second on)
  bool planned_arena = false;  // the layout is the module's memory plan (plan-memory offsets)
  std::vector<Step> steps;
  std::vector<SegmentRun> segments;
  std::vector<std::pair<double, double>> step_work;  // per step: FLOPs, weight bytes (profile)
  ResolvedLaunch greedy;                  // @decode: the greedy pick closing the device loop
  cuda::CUgraphExec greedy_exec = nullptr;  // @decode: the whole step + greedy pick
  absl::flat_hash_map<const ir::Value*, Slot> slots;  // args and results (aliases resolved)
  cuda::DeviceBuffer arena;
  int64_t arena_bytes = 0;
  std::vector<const Op*> kv_appends;
  std::vector<cuda::CUevent> events;  // profiling: one before each step, one after the last
  CUdeviceptr Ptr(const ir::Value* v) const { return arena.ptr() + slots.at(v).offset; }
};

// How far a call of `p` moves the position counter (its advance_positions ops on @pos).
absl::StatusOr<int64_t> PositionAdvance(const CudaExecutor::Program& p, const ir::SymbolBindings& bindings,
                                        const ir::StateVar* position_state);

}  // namespace memra::runtime
