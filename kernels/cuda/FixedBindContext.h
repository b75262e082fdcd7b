// A BindContext over fixed device addresses, for running a unit's Bind outside the executor
// (memra-kernel-bench, the kernel tests, the host emulation): operand 0 is the activation x (its
// rows may be fewer than its static shape: `x_rows`, < 0 = as declared), operands 1.. the
// matrices, then the outputs, the step's scratch and the workspace.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::kernels::cuda {

class FixedBindContext : public BindContext {
 public:
  FixedBindContext(const ir::Op& op, const OpSelection& selection, const OpShapes& shapes, uint64_t x, int64_t x_rows,
                   std::vector<DeviceMatrix> matrices, std::vector<uint64_t> outs, uint64_t scratch,
                   uint64_t workspace = 0)
      : BindContext(op, selection, shapes),
        x_(x),
        x_rows_(x_rows),
        matrices_(std::move(matrices)),
        outs_(std::move(outs)),
        scratch_(scratch),
        workspace_(workspace) {}

  absl::StatusOr<llvm::SmallVector<int64_t, 4>> Shape(const ir::Value* v) const override {
    llvm::SmallVector<int64_t, 4> s;
    for (const ir::Dim& d : v->shape().dims()) s.push_back(d.value());
    if (v == op().operand(0) && x_rows_ >= 0 && !s.empty()) s[0] = x_rows_;
    return s;
  }
  uint64_t In(unsigned i) const override { return i == 0 ? x_ : i <= matrices_.size() ? matrices_[i - 1].data : 0; }
  absl::StatusOr<DeviceMatrix> Matrix(unsigned i) const override {
    if (i == 0 || i > matrices_.size()) return absl::InvalidArgumentError("not a matrix operand");
    return matrices_[i - 1];
  }
  uint64_t Out(unsigned i) const override { return i < outs_.size() ? outs_[i] : 0; }
  uint64_t Scratch() const override { return scratch_; }
  uint64_t Workspace() const override { return workspace_; }

 private:
  uint64_t x_;
  int64_t x_rows_;
  std::vector<DeviceMatrix> matrices_;
  std::vector<uint64_t> outs_;
  uint64_t scratch_, workspace_;
};

}  // namespace memra::kernels::cuda
