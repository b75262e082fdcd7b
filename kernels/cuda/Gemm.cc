// Units of the cuBLASLt products (runtime/cuda/CublasLt runs GemmCall): matmul / matmul_group
// (one product per weight) and matmul_swiglu (gate product into the scratch, up product into y,
// then Elementwise.cu's swiglu_f32 in place). Activations are f32; for a 16-bit compute dtype they
// are cast to it first (Elementwise.cu cast_f32_*, once per distinct dtype) into the step's
// scratch, which holds [cast copy | gate product]. A weight in blocks (the kBlocks layout of
// WeightLayout.h: q4_K, q8_0, ... as the GGUF stores them) is dequantized to bf16 into the
// executor's workspace (Dequant.cu dequant_bf16, one launch per such weight, just before its
// product; the workspace holds the largest such matrix) and multiplied from there, so no bf16
// copy of the model stays on the device.
//
// These units take every token count: GpuOps.def tries the one-token GEMV units first (and the
// per-format GEMVs on blocks, which take T up to their limit), so a product reaches these when
// no GEMV applies: prefill, and until the block-format GEMVs exist decode on blocks too.
#include <algorithm>
#include <set>

#include "ir/StatusMacros.h"
#include "kernels/cuda/DequantParams.h"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {
namespace {

// The launches of a product op, in order: the activation casts (one per distinct 16-bit compute
// dtype), then one dequantization per kBlocks weight (operand order), then the unit's own.
struct ProductPlan {
  std::vector<ir::DType> casts;
  std::vector<int> dequant;  // per operand: index of its dequant_bf16 launch, -1 none
  int64_t cast_bytes = 0;    // the scratch's cast copy (256-aligned)
  int64_t workspace = 0;     // the largest kBlocks weight's bf16 copy
  size_t launches = 0;       // casts + dequantizations
};

ProductPlan PlanProducts(const OpShapes& s) {
  ProductPlan p;
  std::set<ir::DType> casts;
  for (size_t i = 1; i < s.in_dtypes.size(); ++i)
    if (s.in_dtypes[i] != ir::DType::kF32) casts.insert(s.in_dtypes[i]);
  p.casts.assign(casts.begin(), casts.end());
  if (!p.casts.empty()) p.cast_bytes = (Numel(s.in[0]) * 4 / 2 + 255) / 256 * 256;
  p.dequant.assign(s.in.size(), -1);
  int next = static_cast<int>(p.casts.size());
  for (unsigned i = 1; i < s.in.size(); ++i) {
    const WeightLayout* l = s.layout(i);
    if (l == nullptr || l->kind != WeightLayoutKind::kBlocks) continue;
    p.dequant[i] = next++;
    p.workspace = std::max(p.workspace, DequantWorkspaceBytes(*l, s.in[i][0], s.in[i][1]));
  }
  p.launches = static_cast<size_t>(next);
  return p;
}

OpSelection GemmSelection(const SelectContext& c) {
  OpSelection s;
  s.gemm = true;
  const ProductPlan plan = PlanProducts(c.shapes);
  for (ir::DType d : plan.casts)
    s.launches.push_back(GridStrideLaunch(
        c.target, "Elementwise.cu", d == ir::DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16", Numel(c.shapes.in[0])));
  for (unsigned i = 1; i < c.shapes.in.size(); ++i)
    if (plan.dequant[i] >= 0)
      s.launches.push_back(DequantBf16Launch(c.target, c.op.operand(i)->dtype(), c.shapes.in[i][0], c.shapes.in[i][1]));
  s.scratch_bytes = plan.cast_bytes;
  s.workspace_bytes = plan.workspace;
  return s;
}

// Issues the products of weights [first, last] of the op; product i writes y(i).
template <typename OutFn>
absl::Status BindProducts(const BindContext& c, unsigned first, unsigned last, OutFn y, DeviceWork& w) {
  MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
  const int64_t K = x.empty() ? 1 : x.back();
  const int64_t M = Numel(x) / std::max<int64_t>(K, 1);
  const ProductPlan plan = PlanProducts(c.shapes());
  if (plan.launches > c.selection().launches.size()) return BindError(c.op(), "the selection lacks its launches");
  if (plan.workspace > c.selection().workspace_bytes || (plan.workspace > 0 && c.Workspace() == 0))
    return BindError(c.op(), "the selection lacks the workspace its dequantization needs");
  ir::DType cast_now = ir::DType::kF32;  // the dtype the scratch copy holds
  for (unsigned i = first; i <= last; ++i) {
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, c.Matrix(i));
    if (m.cols != K) return BindError(c.op(), "K mismatch");
    const ir::DType dt = m.layout->compute_dtype;
    uint64_t xin = c.In(0);
    if (dt != ir::DType::kF32) {
      if (cast_now != dt) {
        const auto it = std::find(plan.casts.begin(), plan.casts.end(), dt);
        if (it == plan.casts.end()) return BindError(c.op(), "no activation cast selected");
        UnaryParams p;
        p.x = c.In(0);
        p.y = c.Scratch();
        p.n = Numel(x);
        w.Kernel(static_cast<uint32_t>(it - plan.casts.begin()), p);
        cast_now = dt;
      }
      xin = c.Scratch();
    }
    uint64_t wptr = m.data;
    if (m.layout->kind == WeightLayoutKind::kBlocks) {
      if (plan.dequant[i] < 0) return BindError(c.op(), "no dequantization selected for a weight in blocks");
      DequantParams p;
      p.w = m.data;
      p.y = c.Workspace();
      p.row_bytes = m.row_bytes();
      p.row0 = 0;
      p.n_rows = m.rows;
      p.cols = m.cols;
      w.Kernel(static_cast<uint32_t>(plan.dequant[i]), p);
      wptr = c.Workspace();
    }
    w.Count(2.0 * M * m.rows * m.cols, static_cast<double>(m.bytes));
    w.Gemm({xin, wptr, y(i), M, m.rows, m.cols, dt});
  }
  return absl::OkStatus();
}

class GemmImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gemm"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMatMul || k == ir::OpKind::kMatMulGroup; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    return std::optional<OpSelection>(GemmSelection(c));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    return BindProducts(
        c, 1, c.op().num_operands() - 1, [&](unsigned i) { return c.Out(i - 1); }, w);
  }
};

class GemmSwigluImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gemm_swiglu"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMatMulSwiglu; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s = GemmSelection(c);
    s.launches.push_back(GridStrideLaunch(c.target, "Elementwise.cu", GeluGate(c.op) ? "geglu_f32" : "swiglu_f32",
                                          Numel(c.shapes.out[0])));
    AddGluClampDefine(s.launches.back(), c.op);
    s.scratch_bytes += Numel(c.shapes.out[0]) * 4;  // the f32 gate product, after the cast copy
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    const uint64_t gate = c.Scratch() + PlanProducts(c.shapes()).cast_bytes;
    MEMRA_RETURN_IF_ERROR(BindProducts(
        c, 1, 2, [&](unsigned i) { return i == 1 ? gate : c.Out(0); }, w));
    MEMRA_ASSIGN_OR_RETURN(auto y, c.Shape(c.op().result(0)));
    PairParams p;
    p.a = gate;
    p.b = c.Out(0);
    p.y = c.Out(0);
    p.n = Numel(y);
    w.Kernel(static_cast<uint32_t>(c.selection().launches.size() - 1), p);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateGemm() { return std::make_unique<GemmImpl>(); }
std::unique_ptr<GpuOpImpl> CreateGemmSwiglu() { return std::make_unique<GemmSwigluImpl>(); }

}  // namespace memra::kernels::cuda
