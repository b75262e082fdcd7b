// Units of the cuBLASLt products (runtime/cuda/CublasLt runs GemmCall): matmul / matmul_group
// (one product per weight) and matmul_swiglu (gate product into the scratch, up product into y,
// then Elementwise.cu's swiglu_f32 in place). Activations are f32; for a 16-bit weight they are
// cast to its compute dtype first (Elementwise.cu cast_f32_*, once per distinct dtype) into the
// step's scratch, which holds [cast copy | gate product].
#include <set>

#include "ir/StatusMacros.h"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {
namespace {

// The 16-bit compute dtypes the weights need, in launch order (one cast launch each).
std::vector<ir::DType> CastTypes(const OpShapes& s) {
  std::set<ir::DType> casts;
  for (size_t i = 1; i < s.in_dtypes.size(); ++i)
    if (s.in_dtypes[i] != ir::DType::kF32) casts.insert(s.in_dtypes[i]);
  return {casts.begin(), casts.end()};
}

int64_t CastBytes(const std::vector<int64_t>& x) { return (Numel(x) * 4 / 2 + 255) / 256 * 256; }

OpSelection GemmSelection(const SelectContext& c) {
  OpSelection s;
  s.gemm = true;
  const std::vector<ir::DType> casts = CastTypes(c.shapes);
  for (ir::DType d : casts)
    s.launches.push_back(GridStrideLaunch(
        c.target, "Elementwise.cu", d == ir::DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16", Numel(c.shapes.in[0])));
  if (!casts.empty()) s.scratch_bytes = CastBytes(c.shapes.in[0]);
  return s;
}

// Issues the products of weights [first, last] of the op; product i writes y(i).
template <typename OutFn>
absl::Status BindProducts(const BindContext& c, unsigned first, unsigned last, OutFn y, DeviceWork& w) {
  MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
  const int64_t K = x.empty() ? 1 : x.back();
  const int64_t M = Numel(x) / std::max<int64_t>(K, 1);
  const std::vector<ir::DType> casts = CastTypes(c.shapes());
  ir::DType cast_now = ir::DType::kF32;  // the dtype the scratch copy holds
  for (unsigned i = first; i <= last; ++i) {
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, c.Matrix(i));
    if (m.cols != K) return BindError(c.op(), "K mismatch");
    const ir::DType dt = m.layout->compute_dtype;
    uint64_t xin = c.In(0);
    if (dt != ir::DType::kF32) {
      if (cast_now != dt) {
        const auto it = std::find(casts.begin(), casts.end(), dt);
        if (it == casts.end()) return BindError(c.op(), "no activation cast selected");
        UnaryParams p;
        p.x = c.In(0);
        p.y = c.Scratch();
        p.n = Numel(x);
        w.Kernel(static_cast<uint32_t>(it - casts.begin()), p);
        cast_now = dt;
      }
      xin = c.Scratch();
    }
    w.Count(2.0 * M * m.rows * m.cols, static_cast<double>(m.bytes));
    w.Gemm({xin, m.data, y(i), M, m.rows, m.cols, dt});
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
    s.launches.push_back(GridStrideLaunch(c.target, "Elementwise.cu", "swiglu_f32", Numel(c.shapes.out[0])));
    s.scratch_bytes += Numel(c.shapes.out[0]) * 4;  // the f32 gate product, after the cast copy
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    const bool casts = !CastTypes(c.shapes()).empty();
    const uint64_t gate = c.Scratch() + (casts ? CastBytes(c.shapes().in[0]) : 0);
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
