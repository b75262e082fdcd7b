// The collectives of a tensor-parallel module (ir/Ops.def all_reduce, all_gather;
// docs/design/tensor-parallel.md): no kernels of their own but a CollectiveCall the executor
// issues through its NCCL communicator on its stream (graph-capturable, so a segment holding one
// stays one CUDA graph). all_gather along a dim with rows before it (outer > 1) gathers every
// rank's block into scratch and interleaves the blocks with Elementwise.cu's copy_axis_32.
#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {
namespace {

absl::Status F32Only(const ir::Op& op) {
  if (op.operand(0)->dtype() != ir::DType::kF32)
    return Unsupported(op, "the collectives carry f32 activations (the CUDA executor's)");
  return absl::OkStatus();
}

class AllReduceImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "all_reduce"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kAllReduce; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_RETURN_IF_ERROR(F32Only(c.op));
    return std::optional<OpSelection>(OpSelection{});
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    w.Collective({CollectiveCall::kAllReduceSum, c.In(0), c.Out(0), Numel(x)});
    return absl::OkStatus();
  }
};

class AllGatherImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "all_gather"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kAllGather; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_RETURN_IF_ERROR(F32Only(c.op));
    const auto& x = c.shapes.in[0];
    const Geometry g = GeometryOf(c.op, x);
    OpSelection s;
    if (g.outer > 1) {
      s.scratch_bytes = g.parts * Numel(x) * 4;
      for (int64_t r = 0; r < g.parts; ++r)
        s.launches.push_back(GridStrideLaunch(c.target, "Elementwise.cu", "copy_axis_32", Numel(x)));
    }
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto xs, c.InShape(0));
    const std::vector<int64_t> x(xs.begin(), xs.end());
    const Geometry g = GeometryOf(c.op(), x);
    const int64_t n = Numel(x);
    if (g.outer <= 1) {  // the ranks' blocks in rank order are the result
      w.Collective({CollectiveCall::kAllGather, c.In(0), c.Out(0), n});
      return absl::OkStatus();
    }
    if (c.Scratch() == 0 || static_cast<int64_t>(c.selection().launches.size()) != g.parts)
      return BindError(c.op(), "the selection has no gather scratch");
    w.Collective({CollectiveCall::kAllGather, c.In(0), c.Scratch(), n});
    for (int64_t r = 0; r < g.parts; ++r) {
      CopyAxisParams p;
      p.src = c.Scratch() + static_cast<uint64_t>(r * n * 4);
      p.dst = c.Out(0);
      p.outer = g.outer;
      p.src_dim = g.len;
      p.src_off = 0;
      p.dst_dim = g.len * g.parts;
      p.dst_off = r * g.len;
      p.len = g.len;
      p.inner = g.inner;
      w.Kernel(static_cast<uint32_t>(r), p);
    }
    return absl::OkStatus();
  }

 private:
  struct Geometry {
    int64_t outer = 1, len = 1, inner = 1, parts = 1;
  };
  static Geometry GeometryOf(const ir::Op& op, const std::vector<int64_t>& x) {
    Geometry g;
    int64_t axis = op.attrs().I64Or("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(x.size());
    for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
      if (d < axis) g.outer *= x[d];
      if (d > axis) g.inner *= x[d];
    }
    g.len = axis >= 0 && axis < static_cast<int64_t>(x.size()) ? x[axis] : 1;
    g.parts = op.attrs().I64Or("parts", 1);
    return g;
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateAllReduce() { return std::make_unique<AllReduceImpl>(); }
std::unique_ptr<GpuOpImpl> CreateAllGather() { return std::make_unique<AllGatherImpl>(); }

}  // namespace memra::kernels::cuda
