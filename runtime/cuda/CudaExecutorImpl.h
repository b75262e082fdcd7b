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
#include "ir/Function.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/WeightLayout.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"

namespace memra::runtime {

// Names the implementation files use unqualified (this header is included by them alone).
using cuda::CuCheck;
using cuda::CUdeviceptr;
using cuda::CUfunction;
using ir::DType;
using ir::Op;
using ir::OpKind;

namespace kcu = memra::kernels::cuda;

struct CudaExecutor::DeviceWeight {
  const ir::Weight* weight = nullptr;
  // Matrix operands (GEMMs, embedding tables): the layout of kernels/cuda/WeightLayout.h.
  const kcu::WeightLayout* layout = nullptr;
  cuda::DeviceBuffer matrix, scales;
  int64_t matrix_bytes = 0;  // the layout's bytes in `matrix` (its allocation has spare bytes after)
  int64_t rows = 0, cols = 0;
  cuda::DeviceBuffer values;  // f32 values for element consumers (norms, conv, biases)
  kcu::DeviceMatrix AsMatrix() const {
    return {matrix.ptr(),
            scales.ptr(),
            rows,
            cols,
            weight->dtype(),
            layout,
            static_cast<int64_t>(matrix_bytes + scales.bytes())};
  }
};

namespace cuda_exec {

struct ResolvedLaunch {
  kcu::Launch spec;
  CUfunction fn = nullptr;
};

// A value's place in the arena (or an alias of another's).
struct Slot {
  int64_t offset = -1;
  int64_t bytes = 0;
};

// One op of a program: its GPU unit, the selection it runs (the op's record, or selected at
// program build), its loaded kernels and its scratch.
struct Step {
  const Op* op = nullptr;
  kcu::OpShapes shapes;  // at T = bucket
  const kcu::GpuOpImpl* impl = nullptr;
  kcu::OpSelection selection;
  std::vector<ResolvedLaunch> launches;  // selection.launches, loaded
  int64_t scratch_offset = -1;           // selection.scratch_bytes at this arena offset
  int64_t tickets_offset = -1;           // selection.ticket_words at this offset past the planned arena
};

inline int64_t ElemBytes(DType d) {
  return d == DType::kI64 || d == DType::kF64 ? 8 : d == DType::kF16 || d == DType::kBF16 ? 2 : 4;
}

inline int64_t Numel(llvm::ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline absl::StatusOr<llvm::SmallVector<int64_t, 4>> ConcreteShape(const ir::Value* v,
                                                                   const ir::SymbolBindings& bindings) {
  llvm::SmallVector<int64_t, 4> out;
  for (const ir::Dim& d : v->shape().dims()) {
    auto x = d.Evaluate(bindings);
    if (!x) return absl::InvalidArgumentError(absl::StrCat("unbound symbol ", d.ToString()));
    out.push_back(*x);
  }
  return out;
}

// Token ring of the device decode loop: capacity (ids), then one write index and the greedy
// pick's non-finite record (GreedyNextParams::bad: step + 1 or 0, vocabulary id, value bits),
// greedy_next's ticket (+ 3 words of padding) and its per-block partials (3 words each).
constexpr int64_t kTokenRing = 1024;
constexpr int64_t kTokenRingTicket = kTokenRing + 4;
constexpr int64_t kTokenRingParts = kTokenRingTicket + 4;
constexpr int64_t kTokenRingTail = 4 + 4 + 3 * kernels::cuda::kGreedyNextMaxBlocks;
static_assert((kTokenRing + kTokenRingTail) * 4 == kDecodeTokenRingBytes, "runtime/DeviceMemory.h counts the ring");

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
  std::string reason;  // why not (from the IR's segment or passes/Capture.h)
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
  int64_t calls = 0;           // completed Run calls (graphs are captured from the second on)
  bool planned_arena = false;  // the layout is the module's memory plan (plan-memory offsets)
  std::vector<Step> steps;
  std::vector<SegmentRun> segments;
  std::vector<std::pair<double, double>> step_work;   // per step: FLOPs, weight bytes (profile)
  ResolvedLaunch greedy;                              // @decode: the greedy pick closing the device loop
  cuda::CUgraphExec greedy_exec = nullptr;            // @decode: the whole step + greedy pick
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
