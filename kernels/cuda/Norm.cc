// Units of kernels/cuda/Norm.cu: row normalizations (rms_norm, l2_norm, gated_rms_norm,
// add_rms_norm), row reductions (softmax, argmax) and the decode loop's greedy pick.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/NormParams.h"
#include "kernels/cuda/Q8Companion.h"
#include "kernels/cuda/RowLaunch.h"

namespace memra::kernels::cuda {

Launch RowLaunch(const std::string& entry, int64_t rows, int64_t cols, int64_t max_block) {
  Launch l;
  l.kernel.module.file = "Norm.cu";
  int64_t block = 32;  // a power of two (the argmax tree reduction needs one)
  while (block < cols && block < max_block) block *= 2;
  l.kernel.module.defines = MakeDefines({Def("NORM_COLS", cols), Def("NORM_BLOCK", block)});
  l.kernel.entry = entry;
  l.block = static_cast<uint32_t>(block);
  l.grid = static_cast<uint32_t>(std::clamp<int64_t>(rows, 1, 1 << 20));
  return l;
}

Launch NormRowLaunch(const std::string& entry, int64_t rows, int64_t cols) {
  if (cols > kWarpRowMaxCols) return RowLaunch(entry, rows, cols, 256);
  constexpr int64_t kBlock = 256, kRowsPerBlock = kBlock / 32;
  Launch l;
  l.kernel.module.file = "Norm.cu";
  l.kernel.module.defines = MakeDefines({Def("NORM_COLS", cols), Def("NORM_BLOCK", kBlock), Def("NORM_WARP_ROWS", 1)});
  l.kernel.entry = entry;
  l.block = kBlock;
  l.grid = static_cast<uint32_t>(std::clamp<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, 1, 1 << 20));
  return l;
}

namespace {

// Rows of the last dimension.
int64_t Rows(llvm::ArrayRef<int64_t> s) {
  const int64_t cols = s.empty() ? 1 : s.back();
  return Numel(s) / std::max<int64_t>(cols, 1);
}

// One row launch over operand 0 (its last dimension is the row).
std::optional<OpSelection> RowSelection(const SelectContext& c, const std::string& entry, int64_t max_block) {
  const auto& x = c.shapes.in[0];
  OpSelection s;
  s.launches.push_back(RowLaunch(entry, Rows(x), x.empty() ? 1 : x.back(), max_block));
  return s;
}

// One block per row of the last dimension; eps from the op.
class RowNormImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "row_norm"; }
  bool Implements(ir::OpKind k) const override {
    return k == ir::OpKind::kRmsNorm || k == ir::OpKind::kL2Norm || k == ir::OpKind::kGatedRmsNorm ||
           k == ir::OpKind::kAddRmsNorm;
  }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& x = c.shapes.in[0];
    OpSelection s;
    s.launches.push_back(NormRowLaunch(Entry(c.op.kind()), Rows(x), x.empty() ? 1 : x.back()));
    // A companion of the normalized rows (select-kernels' pairing): each warp quantizes the groups
    // it stores. l2_norm and add_rms_norm's sum write none.
    const std::optional<Q8Companion> q8 = Q8CompanionOf(c.op);
    if (q8 && !c.op.is(ir::OpKind::kL2Norm) && q8->result == NormalizedResult(c.op.kind())) {
      // A long row's companion is a warp's amax, division and sums per 32 values in each thread's
      // sequence through its share of the row: a decode row of 4,096 in a block of 256 took 11.2
      // us a call with the companion against 6.8 without (session 27, H100, Step 3.5's
      // add_rms_norm, eager). Few long rows then take 1,024 threads (not yet measured).
      constexpr int64_t kFewRows = 32;
      if (x.back() > kWarpRowMaxCols && Rows(x) <= kFewRows)
        s.launches[0] = RowLaunch(Entry(c.op.kind()), Rows(x), x.back(), 1024);
      AddQ8CompanionDefines(*q8, s.launches[0]);
    }
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    NormParams p;
    p.x = c.In(0);
    p.n_rows = Rows(x);
    p.eps = static_cast<float>(c.op().attrs().F64Or("eps", 0));
    switch (c.op().kind()) {
      case ir::OpKind::kRmsNorm:  // without a weight, p.w = 0: the kernel scales by 1
        p.w = c.op().num_operands() > 1 ? c.In(1) : 0, p.y = c.Out(0);
        break;
      case ir::OpKind::kL2Norm:
        p.y = c.Out(0);
        break;
      case ir::OpKind::kGatedRmsNorm:
        p.z = c.In(1), p.w = c.In(2), p.y = c.Out(0);
        break;
      default:
        p.z = c.In(1), p.w = c.In(2), p.sum = c.Out(0), p.y = c.Out(1);
        break;  // add_rms_norm
    }
    MEMRA_RETURN_IF_ERROR(CheckQ8CompanionBinding(c, Numel(x)));
    w.Kernel(0, p);
    return absl::OkStatus();
  }

 private:
  static unsigned NormalizedResult(ir::OpKind k) { return k == ir::OpKind::kAddRmsNorm ? 1 : 0; }
  static const char* Entry(ir::OpKind k) {
    return k == ir::OpKind::kRmsNorm        ? "rms_norm"
           : k == ir::OpKind::kL2Norm       ? "l2_norm"
           : k == ir::OpKind::kGatedRmsNorm ? "gated_rms_norm"
                                            : "add_rms_norm";
  }
};

class RowReduceImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "row_reduce"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kSoftmax || k == ir::OpKind::kArgmax; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    std::optional<OpSelection> s = RowSelection(c, c.op.is(ir::OpKind::kSoftmax) ? "softmax" : "argmax", 1024);
    if (std::optional<int64_t> bad = c.op.attrs().GetI64("nonfinite"))
      s->launches[0].kernel.module.defines =
          MakeDefines({Def("NORM_COLS", c.shapes.in[0].back()), Def("NORM_BLOCK", s->launches[0].block),
                       Def("NORM_ARGMAX_NONFINITE", *bad)});
    return s;
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    RowParams p;
    p.x = c.In(0);
    p.y = c.Out(0);
    p.n_rows = Rows(x);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateRowNorm() { return std::make_unique<RowNormImpl>(); }
std::unique_ptr<GpuOpImpl> CreateRowReduce() { return std::make_unique<RowReduceImpl>(); }

absl::StatusOr<Launch> GreedyNextLaunch(const ir::Function& decode, const Target&) {
  const ir::Op* ret = nullptr;
  for (const ir::Op* op : decode.Ops())
    if (op->is(ir::OpKind::kReturn)) ret = op;
  if (ret == nullptr || ret->num_operands() != 1 || ret->operand(0)->dtype() != ir::DType::kF32 ||
      ret->operand(0)->shape().rank() != 2 || !ret->operand(0)->shape().IsStatic() ||
      ret->operand(0)->shape()[0].value() != 1)
    return absl::FailedPreconditionError(
        absl::StrCat("@", decode.name(), " does not return one row of f32 logits [1, V]: no greedy decode loop"));
  // Several blocks over the row (one block of 1024 over the 9B's 248,320 logits took 46 us): ~8
  // values per thread, at most kGreedyNextMaxBlocks.
  const int64_t V = ret->operand(0)->shape()[1].value();
  Launch l = RowLaunch("greedy_next", 1, V, 1024);
  l.grid = static_cast<uint32_t>(std::clamp<int64_t>((V + l.block * 8 - 1) / (l.block * 8), 1, kGreedyNextMaxBlocks));
  return l;
}

}  // namespace memra::kernels::cuda
