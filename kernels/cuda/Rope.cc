// Units of kernels/cuda/Rope.cu: NeoX rotary embedding, and qk_norm_rope (per-head rms_norm of
// Norm.cu into the step's scratch, then the rotation into the result; q, then k).
#include <algorithm>
#include <cmath>

#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/NormParams.h"
#include "kernels/cuda/RopeParams.h"
#include "kernels/cuda/RowLaunch.h"

namespace memra::kernels::cuda {
namespace {

absl::Status CheckNeox(const ir::Op& op) {
  if (op.attrs().GetString("mode").value_or("neox") != "neox") return Unsupported(op, "only neox rope");
  return absl::OkStatus();
}

Launch RopeLaunch(const Target& t, const ir::Op& op, const std::vector<int64_t>& x) {
  return GridStrideLaunch(
      t, "Rope.cu", "rope_neox", Numel(x),
      {Def("ROPE_HEADS", x[1]), Def("ROPE_DIM", x[2]), Def("ROPE_NROT", op.attrs().I64Or("n_rot", x[2]))});
}

// theta_{i+1} = theta_i * base^(-2 / n_rot), formed in f32 as ggml does.
float ThetaScale(const ir::Op& op) {
  const int64_t n_rot = op.attrs().I64Or("n_rot", 0);
  const float base = static_cast<float>(op.attrs().F64Or("base", 10000.0));
  return std::pow(base, -2.0f / static_cast<float>(n_rot));
}

class RopeImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "rope"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kRope; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& x = c.shapes.in[0];
    if (x.size() != 3) return Unsupported(c.op, "rope expects x: [T, H, D]");
    MEMRA_RETURN_IF_ERROR(CheckNeox(c.op));
    OpSelection s;
    s.launches.push_back(RopeLaunch(c.target, c.op, x));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    RopeParams p;
    p.x = c.In(0);
    p.y = c.Out(0);
    p.pos = c.In(1);
    p.freq_factors = c.op().num_operands() > 2 ? c.In(2) : 0;  // a value weight: its f32 values
    p.n_tok = static_cast<int>(x[0]);
    p.theta_scale = ThetaScale(c.op());
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// Launches: qk_norm_rope_pair (q's rows then k's, one warp per head row, Rope.cu) where the head
// dim is a multiple of 32 of at most 512 and n_rot / 2 a multiple of 32; else rms_norm(q),
// rope(q), rms_norm(k), rope(k) with the normed q or k in the scratch (f32). A record of the
// earlier form, qk_norm_rope_rows(q) then (k), still binds.
class QkNormRopeImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "qk_norm_rope"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kQkNormRope; }
  static bool Fused(const ir::Op& op, const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
    const int64_t d = q[2], n_rot = op.attrs().I64Or("n_rot", d);
    return d == k[2] && d % 32 == 0 && d <= kWarpRowMaxCols && n_rot <= d && n_rot % 64 == 0;
  }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& q = c.shapes.in[0];
    const auto& k = c.shapes.in[1];
    if (q.size() != 3 || k.size() != 3) return Unsupported(c.op, "qk_norm_rope expects q, k: [T, H, D]");
    MEMRA_RETURN_IF_ERROR(CheckNeox(c.op));
    OpSelection s;
    if (Fused(c.op, q, k)) {
      Launch l = RopeLaunch(c.target, c.op, q);
      Defines d = l.kernel.module.defines;
      d.push_back(Def("ROPE_HEADS_K", k[1]));
      l.kernel.module.defines = MakeDefines(std::move(d));
      l.kernel.entry = "qk_norm_rope_pair";
      l.block = 256;  // eight rows a block
      l.grid = static_cast<uint32_t>(std::clamp<int64_t>((q[0] * q[1] + k[0] * k[1] + 7) / 8, 1, 1 << 20));
      s.launches.push_back(std::move(l));
      return std::optional<OpSelection>(std::move(s));
    }
    for (const auto* x : {&q, &k}) {
      s.launches.push_back(NormRowLaunch("rms_norm", (*x)[0] * (*x)[1], (*x)[2]));
      s.launches.push_back(RopeLaunch(c.target, c.op, *x));
    }
    s.scratch_bytes = std::max(Numel(q), Numel(k)) * 4;
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    const uint64_t tmp = c.Scratch();
    const float eps = static_cast<float>(c.op().attrs().F64Or("eps", 0));
    const std::vector<Launch>& ls = c.selection().launches;
    if (ls.size() == 1 && ls[0].kernel.entry == "qk_norm_rope_pair") {
      MEMRA_ASSIGN_OR_RETURN(auto q, c.InShape(0));
      MEMRA_ASSIGN_OR_RETURN(auto k, c.InShape(1));
      QkNormRopePairParams f;
      f.qx = c.In(0);
      f.kx = c.In(1);
      f.qw = c.In(2);
      f.kw = c.In(3);
      f.qy = c.Out(0);
      f.ky = c.Out(1);
      f.pos = c.In(4);
      f.freq_factors = c.op().num_operands() > 5 ? c.In(5) : 0;  // a value weight: its f32 values
      f.n_q = q[0] * q[1];
      f.n_k = k[0] * k[1];
      f.eps = eps;
      f.theta_scale = ThetaScale(c.op());
      w.Kernel(0, f);
      return absl::OkStatus();
    }
    if (ls.size() == 2) {  // qk_norm_rope_rows (q), (k): a record of the earlier form
      if (c.op().num_operands() > 5) return BindError(c.op(), "qk_norm_rope: stale selection (freq_factors)");
      for (unsigned i = 0; i < 2; ++i) {
        MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(i));
        QkNormRopeParams f;
        f.x = c.In(i);
        f.w = c.In(2 + i);
        f.y = c.Out(i);
        f.pos = c.In(4);
        f.n_rows = x[0] * x[1];
        f.eps = eps;
        f.theta_scale = ThetaScale(c.op());
        w.Kernel(i, f);
      }
      return absl::OkStatus();
    }
    for (unsigned i = 0; i < 2; ++i) {
      MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(i));
      NormParams n;
      n.x = c.In(i);
      n.w = c.In(2 + i);
      n.y = tmp;
      n.n_rows = x[0] * x[1];
      n.eps = eps;
      w.Kernel(2 * i, n);
      RopeParams r;
      r.x = tmp;
      r.y = c.Out(i);
      r.pos = c.In(4);
      r.freq_factors = c.op().num_operands() > 5 ? c.In(5) : 0;
      r.n_tok = static_cast<int>(x[0]);
      r.theta_scale = ThetaScale(c.op());
      w.Kernel(2 * i + 1, r);
    }
    return absl::OkStatus();
  }
};

// qk_norm_rope_append (fuse-qk-norm-rope-append): one launch, qk_norm_rope_pair's rows with k's
// stored into its cache and v's rows (normed where v_norm_eps is set) into theirs. Where the pair
// kernel does not apply (a head dim past a warp's registers, n_rot not a multiple of 64) the unit
// refuses: the pass forms the op only where it does.
class QkNormRopeAppendImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "qk_norm_rope_append"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kQkNormRopeAppend; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& k = c.shapes.in[0];
    const auto& q = c.shapes.in[5];
    if (q.size() != 3 || k.size() != 3) return Unsupported(c.op, "qk_norm_rope_append expects q, k: [T, H, D]");
    MEMRA_RETURN_IF_ERROR(CheckNeox(c.op));
    if (!QkNormRopeImpl::Fused(c.op, q, k))
      return Unsupported(c.op,
                         "qk_norm_rope_append needs a head dim of a multiple of 32 up to 512 and n_rot a "
                         "multiple of 64");
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 2, 3));
    Launch l = RopeLaunch(c.target, c.op, q);
    Defines d = l.kernel.module.defines;
    d.push_back(Def("ROPE_HEADS_K", k[1]));
    d.push_back(Def("KV_KT", codes.first));
    d.push_back(Def("KV_VT", codes.second));
    if (c.op.attrs().I64Or("ring", 0) > 0) d.push_back(Def("KV_RING", c.shapes.in[2][0]));  // a ring's rows
    l.kernel.module.defines = MakeDefines(std::move(d));
    l.kernel.entry = "qk_norm_rope_append";
    l.block = 256;  // eight rows a block
    l.grid = static_cast<uint32_t>(std::clamp<int64_t>((q[0] * q[1] + 2 * k[0] * k[1] + 7) / 8, 1, 1 << 20));
    OpSelection s;
    s.launches.push_back(std::move(l));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    if (c.selection().launches.size() != 1 || c.selection().launches[0].kernel.entry != "qk_norm_rope_append")
      return BindError(c.op(), "qk_norm_rope_append: stale selection");
    MEMRA_ASSIGN_OR_RETURN(auto k, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto q, c.InShape(5));
    QkNormRopeAppendParams f;
    f.kx = c.In(0);
    f.vx = c.In(1);
    f.k_cache = c.In(2);
    f.v_cache = c.In(3);
    f.pos = c.In(4);
    f.qx = c.In(5);
    f.qw = c.In(6);
    f.kw = c.In(7);
    f.freq_factors = c.op().num_operands() > 8 ? c.In(8) : 0;
    f.qy = c.Out(0);
    f.n_q = q[0] * q[1];
    f.n_k = k[0] * k[1];
    f.eps = static_cast<float>(c.op().attrs().F64Or("eps", 0));
    f.theta_scale = ThetaScale(c.op());
    f.v_norm_eps = static_cast<float>(c.op().attrs().F64Or("v_norm_eps", -1.0));
    f.pad = 0;
    w.Kernel(0, f);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateRope() { return std::make_unique<RopeImpl>(); }
std::unique_ptr<GpuOpImpl> CreateQkNormRope() { return std::make_unique<QkNormRopeImpl>(); }
std::unique_ptr<GpuOpImpl> CreateQkNormRopeAppend() { return std::make_unique<QkNormRopeAppendImpl>(); }

}  // namespace memra::kernels::cuda
