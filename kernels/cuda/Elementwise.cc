// Units of kernels/cuda/Elementwise.cu: elementwise math, casts, copies, the embedding lookup,
// positions, the KV append and the small per-token ops of the delta-net, plus the ops that only
// alias memory (reshape, return) or run on the host. Every kernel here is grid-stride over the
// call's element count, so the grid covers the bucket and the valid count is a parameter.
//
// A new elementwise op: its kernel in Elementwise.cu, a row in kUnaryKernels (y = f(x)) or a unit
// below, its entry in GpuOps.def when it is a new unit.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/NormParams.h"
#include "kernels/cuda/RowLaunch.h"

namespace memra::kernels::cuda {
namespace {

constexpr const char* kFile = "Elementwise.cu";

// A unit with one grid-stride launch of a fixed entry over operand 0's elements.
class OneLaunchImpl : public GpuOpImpl {
 public:
  OneLaunchImpl(const char* name, ir::OpKind kind, const char* entry) : name_(name), kind_(kind), entry_(entry) {}
  absl::string_view name() const override { return name_; }
  bool Implements(ir::OpKind k) const override { return k == kind_; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, entry_, Numel(c.shapes.in[0])));
    return std::optional<OpSelection>(std::move(s));
  }

 private:
  const char* name_;
  ir::OpKind kind_;
  const char* entry_;
};

// y = f(x): one row per op kind.
struct UnaryKernel {
  ir::OpKind kind;
  const char* entry;
};
constexpr UnaryKernel kUnaryKernels[] = {
    {ir::OpKind::kSigmoid, "sigmoid_f32"}, {ir::OpKind::kSilu, "silu_f32"}, {ir::OpKind::kSoftplus, "softplus_f32"},
    {ir::OpKind::kExp, "exp_f32"},         {ir::OpKind::kGelu, "gelu_f32"}, {ir::OpKind::kTanh, "tanh_f32"},
};

class UnaryImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "unary"; }
  bool Implements(ir::OpKind k) const override { return Find(k) != nullptr; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, Find(c.op.kind())->entry, Numel(c.shapes.in[0])));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    UnaryParams p;
    p.x = c.In(0);
    p.y = c.Out(0);
    p.n = Numel(x);
    w.Kernel(0, p);
    return absl::OkStatus();
  }

 private:
  static const UnaryKernel* Find(ir::OpKind k) {
    for (const UnaryKernel& u : kUnaryKernels)
      if (u.kind == k) return &u;
    return nullptr;
  }
};

// add / mul with operand 1 broadcast over operand 0's leading dims.
class BroadcastImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "broadcast"; }
  // mul_weight is a mul by its weight's f32 values ([N] or [1]: both divide x).
  bool Implements(ir::OpKind k) const override {
    return k == ir::OpKind::kAdd || k == ir::OpKind::kMul || k == ir::OpKind::kMulWeight;
  }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(
        GridStrideLaunch(c.target, kFile, c.op.is(ir::OpKind::kAdd) ? "add_f32" : "mul_f32", Numel(c.shapes.in[0])));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto a, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto b, c.InShape(1));
    const int64_t n = Numel(a), nb = Numel(b);
    if (nb == 0 || n % nb != 0) return BindError(c.op(), "broadcast operand does not divide the first");
    BroadcastParams p;
    p.a = c.In(0);
    p.b = c.In(1);
    p.y = c.Out(0);
    p.n = n;
    p.nb = nb;
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// mul_rows: x [..., N] times one factor per row (BroadcastParams' nb is the row width N).
class MulRowsImpl : public OneLaunchImpl {
 public:
  MulRowsImpl() : OneLaunchImpl("mul_rows", ir::OpKind::kMulRows, "mul_rows_f32") {}
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto s, c.InShape(1));
    const int64_t n = Numel(x), width = x.empty() ? 1 : x.back();
    if (width <= 0 || Numel(s) * width != n) return BindError(c.op(), "the factors are not one per row of x");
    BroadcastParams p;
    p.a = c.In(0);
    p.b = c.In(1);
    p.y = c.Out(0);
    p.n = n;
    p.nb = width;
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class ScaleImpl : public OneLaunchImpl {
 public:
  ScaleImpl() : OneLaunchImpl("scale", ir::OpKind::kScale, "scale_f32") {}
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    ScaleParams p;
    p.x = c.In(0);
    p.y = c.Out(0);
    p.n = Numel(x);
    p.factor = static_cast<float>(c.op().attrs().F64Or("factor", 1.0));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class SwigluImpl : public OneLaunchImpl {
 public:
  SwigluImpl() : OneLaunchImpl("swiglu", ir::OpKind::kSwiglu, "swiglu_f32") {}
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_ASSIGN_OR_RETURN(std::optional<OpSelection> s, OneLaunchImpl::Select(c));
    AddGluClampDefine(s->launches[0], c.op);
    return s;
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    PairParams p;
    p.a = c.In(0);
    p.b = c.In(1);
    p.y = c.Out(0);
    p.n = Numel(x);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// y[t] = table[ids[t]] from the table's device layout (f32, f16 or bf16).
class EmbedImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "embed"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kEmbed; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const WeightLayout* l = c.shapes.layout(1);
    if (l == nullptr || (l->kind != WeightLayoutKind::kAsStored && l->kind != WeightLayoutKind::kBf16Dequantized))
      return std::optional<OpSelection>();  // blocks: Dequant.cc's embed_blocks
    OpSelection s;
    s.launches.push_back(
        GridStrideLaunch(c.target, kFile, "embed", Numel(c.shapes.out[0]),
                         {Def("EMBED_DIM", c.shapes.in[1][1]), Def("EMBED_TYPE", StorageCode(c.shapes.in_dtypes[1]))}));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto ids, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix table, c.Matrix(1));
    EmbedParams p;
    p.ids = c.In(0);
    p.table = table.data;
    p.y = c.Out(0);
    p.n_tok = static_cast<int>(Numel(ids));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class PositionsImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "positions"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kPositions; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, "positions", c.shapes.out[0][0]));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto like, c.InShape(1));
    PositionsParams p;
    p.counter = c.In(0);
    p.pos = c.Out(0);
    p.n_tok = static_cast<int>(like[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class AdvancePositionsImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "advance_positions"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kAdvancePositions; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, "advance_positions", 1));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto like, c.InShape(1));
    PositionsParams p;
    p.counter = c.In(0);
    p.n_tok = static_cast<int>(like[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class KvAppendImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "kv_append"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kKvAppend; }
  // v_norm_eps (fuse-kv-append-norm): kv_append_vnorm, a warp a (token, head) row, where the head
  // dim is a multiple of 32 of at most 512; else Norm.cu's rms_norm of v into the scratch, then
  // kv_append from it.
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& k = c.shapes.in[0];
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 2, 3));
    Defines defs = {Def("KV_WIDTH", k[1] * k[2]), Def("KV_KT", codes.first), Def("KV_VT", codes.second)};
    if (c.op.attrs().I64Or("ring", 0) > 0) defs.push_back(Def("KV_RING", c.shapes.in[2][0]));  // a ring's rows
    OpSelection s;
    if (c.op.attrs().Has("v_norm_eps")) {
      const int64_t rows = k[0] * k[1], d = k[2];
      if (d % 32 == 0 && d <= kWarpRowMaxCols) {
        defs.push_back(Def("KV_HEAD_DIM", d));
        Launch l = GridStrideLaunch(c.target, kFile, "kv_append_vnorm", rows, std::move(defs));
        l.block = 256;  // eight rows a block
        l.grid = static_cast<uint32_t>(std::clamp<int64_t>((rows + 7) / 8, 1, 1 << 20));
        s.launches.push_back(std::move(l));
        return std::optional<OpSelection>(std::move(s));
      }
      s.launches.push_back(NormRowLaunch("rms_norm", rows, d));
      s.scratch_bytes = Numel(k) * 4;
    }
    s.launches.push_back(GridStrideLaunch(c.target, kFile, "kv_append", Numel(k), std::move(defs)));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto k, c.InShape(0));
    KvAppendParams p;
    p.k = c.In(0);
    p.v = c.In(1);
    p.k_cache = c.In(2);
    p.v_cache = c.In(3);
    p.pos = c.In(4);
    p.n_tok = static_cast<int>(k[0]);
    p.v_norm_eps = static_cast<float>(c.op().attrs().F64Or("v_norm_eps", 0.0));
    const std::vector<Launch>& ls = c.selection().launches;
    const bool normed = c.op().attrs().Has("v_norm_eps");
    if (ls.size() == 2) {  // rms_norm(v) into the scratch, then the append from it
      if (!normed || c.Scratch() == 0) return BindError(c.op(), "kv_append: stale selection (v norm)");
      NormParams n;
      n.x = c.In(1);
      n.w = 0;
      n.y = c.Scratch();
      n.n_rows = k[0] * k[1];
      n.eps = p.v_norm_eps;
      w.Kernel(0, n);
      p.v = c.Scratch();
      w.Kernel(1, p);
      return absl::OkStatus();
    }
    if (ls.size() != 1 || normed != (ls[0].kernel.entry == "kv_append_vnorm"))
      return BindError(c.op(), "kv_append: stale selection (v norm)");
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class QGateSplitImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "q_gate_split"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kQGateSplit; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(
        c.target, kFile, "q_gate_split", Numel(c.shapes.out[0]),
        {Def("QG_HEADS", c.op.attrs().I64Or("n_head", 0)), Def("QG_DIM", c.op.attrs().I64Or("head_dim", 0))}));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    QGateSplitParams p;
    p.qg = c.In(0);
    p.q = c.Out(0);
    p.gate = c.Out(1);
    p.n_tok = static_cast<int>(x[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class DeltaNetGatesImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "delta_net_gates"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kDeltaNetGates; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, "delta_net_gates", Numel(c.shapes.in[0]),
                                          {Def("GATE_HEADS", c.shapes.in[0][1])}));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    DeltaNetGatesParams p;
    p.b = c.In(0);
    p.a = c.In(1);
    p.dt_bias = c.In(2);
    p.ssm_a = c.In(3);
    p.beta = c.Out(0);
    p.g = c.Out(1);
    p.n_tok = static_cast<int>(x[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// [outer, dim, inner] views of operand 0 around `axis` (4-byte elements only).
struct AxisView {
  int64_t axis, outer, inner;
};
absl::StatusOr<AxisView> AxisOf(const BindContext& c) {
  MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
  if (ir::StorageBytes(c.op().operand(0)->dtype(), 1).value_or(0) != 4)
    return BindError(c.op(), "only 4-byte elements are supported");
  int64_t axis = c.op().attrs().I64Or("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(x.size());
  AxisView v{axis, 1, 1};
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    if (i < axis) v.outer *= x[i];
    if (i > axis) v.inner *= x[i];
  }
  return v;
}

class ConcatImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "concat"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kConcat; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    for (const auto& in : c.shapes.in)
      s.launches.push_back(GridStrideLaunch(c.target, kFile, "copy_axis_32", Numel(in)));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(AxisView v, AxisOf(c));
    std::vector<int64_t> lens;
    int64_t total = 0;
    for (unsigned i = 0; i < c.op().num_operands(); ++i) {
      MEMRA_ASSIGN_OR_RETURN(auto si, c.InShape(i));
      lens.push_back(si[v.axis]);
      total += si[v.axis];
    }
    int64_t off = 0;
    for (unsigned i = 0; i < c.op().num_operands(); ++i) {
      CopyAxisParams p;
      p.src = c.In(i);
      p.dst = c.Out(0);
      p.outer = v.outer;
      p.src_dim = lens[i];
      p.src_off = 0;
      p.dst_dim = total;
      p.dst_off = off;
      p.len = lens[i];
      p.inner = v.inner;
      w.Kernel(i, p);
      off += lens[i];
    }
    return absl::OkStatus();
  }
};

// split (sizes along axis) and view (one slice at offset).
class SplitViewImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "split_view"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kSplit || k == ir::OpKind::kView; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& x = c.shapes.in[0];
    int64_t axis = c.op.attrs().I64Or("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(x.size());
    int64_t inner = 1;
    for (int64_t i = axis + 1; i < static_cast<int64_t>(x.size()); ++i) inner *= x[static_cast<size_t>(i)];
    const bool split = c.op.is(ir::OpKind::kSplit);
    const std::vector<int64_t> sizes = split ? c.op.attrs().GetI64Array("sizes").value_or(std::vector<int64_t>{})
                                             : std::vector<int64_t>{c.op.attrs().I64Or("size", 0)};
    int64_t off = split ? 0 : c.op.attrs().I64Or("offset", 0);
    const bool rows16 =
        axis >= 0 && axis < static_cast<int64_t>(x.size()) && x[static_cast<size_t>(axis)] * inner % 4 == 0;
    OpSelection s;
    for (size_t i = 0; i < c.shapes.out.size(); ++i) {
      const int64_t size = i < sizes.size() ? sizes[i] : 0;
      // Rows of the slice, and its starts in both tensors, in whole 16-byte pieces (copy_axis_128).
      const bool wide = rows16 && size * inner % 4 == 0 && off * inner % 4 == 0;
      const int64_t n = Numel(c.shapes.out[i]);
      s.launches.push_back(wide ? GridStrideLaunch(c.target, kFile, "copy_axis_128", n / 4)
                                : GridStrideLaunch(c.target, kFile, "copy_axis_32", n));
      off += size;
    }
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(AxisView v, AxisOf(c));
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    const ir::AttrDict& at = c.op().attrs();
    const bool split = c.op().is(ir::OpKind::kSplit);
    const std::vector<int64_t> sizes =
        split ? at.GetI64Array("sizes").value_or(std::vector<int64_t>{}) : std::vector<int64_t>{at.I64Or("size", 0)};
    if (sizes.size() != c.op().num_results()) return BindError(c.op(), "one size per result expected");
    int64_t off = split ? 0 : at.I64Or("offset", 0);
    for (size_t i = 0; i < sizes.size(); ++i) {
      CopyAxisParams p;
      p.src = c.In(0);
      p.dst = c.Out(static_cast<unsigned>(i));
      // A contiguous slice that plan-memory placed where it already lies in the input
      // (passes/MemoryPlan.h SliceViewOffsets): the copy would be the identity.
      if (v.outer == 1 && p.dst.addr == p.src.addr + static_cast<uint64_t>(off * v.inner) * 4) {
        off += sizes[i];
        continue;
      }
      p.outer = v.outer;
      p.src_dim = x[v.axis];
      p.src_off = off;
      p.dst_dim = sizes[i];
      p.dst_off = 0;
      p.len = sizes[i];
      p.inner = v.inner;
      if (c.selection().launches[i].kernel.entry == "copy_axis_128" && ((p.src.addr | p.dst.addr) & 15) != 0)
        return BindError(c.op(), "copy_axis_128 needs 16-byte aligned tensors");
      w.Kernel(static_cast<uint32_t>(i), p);
      off += sizes[i];
    }
    return absl::OkStatus();
  }
};

class ConstantImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "constant"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kConstant; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(
        c.target, kFile, c.op.result(0)->dtype() == ir::DType::kI32 ? "fill_i32" : "fill_f32", Numel(c.shapes.out[0])));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto y, c.Shape(c.op().result(0)));
    const double v = c.op().attrs().F64Or("value", 0);
    FillParams p;
    p.y = c.Out(0);
    p.n = Numel(y);
    p.f32_value = static_cast<float>(v);
    p.i32_value = static_cast<int>(v);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// The last row of operand 0: one device-to-device copy.
class TakeLastRowImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "take_last_row"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kTakeLastRow; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext&) const override {
    return std::optional<OpSelection>(OpSelection{});
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    const int64_t rows = std::max<int64_t>(x[0], 1);
    const int64_t row_bytes = (Numel(x) / rows) * ir::StorageBytes(c.op().operand(0)->dtype(), 1).value_or(0);
    w.Copy(c.Out(0), c.In(0) + (x[0] - 1) * row_bytes, row_bytes);
    return absl::OkStatus();
  }
};

// Ops that only name memory: reshape and cast to f32 alias their input (the executor's layout),
// return is read by the host, segment only groups.
class AliasImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "alias"; }
  bool Implements(ir::OpKind k) const override {
    return k == ir::OpKind::kReshape || k == ir::OpKind::kCast || k == ir::OpKind::kReturn || k == ir::OpKind::kSegment;
  }
  bool DoesDeviceWork() const override { return false; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    if (c.op.is(ir::OpKind::kCast) &&
        (c.op.attrs().GetString("dtype").value_or("") != "f32" || c.op.operand(0)->dtype() != ir::DType::kF32))
      return Unsupported(c.op, "the CUDA executor keeps activations in f32 (casts to f32 only)");
    return std::optional<OpSelection>(OpSelection{});
  }
  absl::Status Bind(const BindContext&, DeviceWork&) const override { return absl::OkStatus(); }
};

class HostOnlyImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "host_only"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kTopK; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    return Unsupported(c.op, "not implemented on the GPU yet (top-n logprobs run on the host)");
  }
  absl::Status Bind(const BindContext& c, DeviceWork&) const override {
    return BindError(c.op(), "not implemented on the GPU");
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateUnary() { return std::make_unique<UnaryImpl>(); }
std::unique_ptr<GpuOpImpl> CreateBroadcast() { return std::make_unique<BroadcastImpl>(); }
std::unique_ptr<GpuOpImpl> CreateScale() { return std::make_unique<ScaleImpl>(); }
std::unique_ptr<GpuOpImpl> CreateMulRows() { return std::make_unique<MulRowsImpl>(); }
std::unique_ptr<GpuOpImpl> CreateSwiglu() { return std::make_unique<SwigluImpl>(); }
std::unique_ptr<GpuOpImpl> CreateEmbed() { return std::make_unique<EmbedImpl>(); }
std::unique_ptr<GpuOpImpl> CreatePositions() { return std::make_unique<PositionsImpl>(); }
std::unique_ptr<GpuOpImpl> CreateAdvancePositions() { return std::make_unique<AdvancePositionsImpl>(); }
std::unique_ptr<GpuOpImpl> CreateKvAppend() { return std::make_unique<KvAppendImpl>(); }
std::unique_ptr<GpuOpImpl> CreateQGateSplit() { return std::make_unique<QGateSplitImpl>(); }
std::unique_ptr<GpuOpImpl> CreateDeltaNetGates() { return std::make_unique<DeltaNetGatesImpl>(); }
std::unique_ptr<GpuOpImpl> CreateConcat() { return std::make_unique<ConcatImpl>(); }
std::unique_ptr<GpuOpImpl> CreateSplitView() { return std::make_unique<SplitViewImpl>(); }
std::unique_ptr<GpuOpImpl> CreateConstant() { return std::make_unique<ConstantImpl>(); }
std::unique_ptr<GpuOpImpl> CreateTakeLastRow() { return std::make_unique<TakeLastRowImpl>(); }
std::unique_ptr<GpuOpImpl> CreateAlias() { return std::make_unique<AliasImpl>(); }
std::unique_ptr<GpuOpImpl> CreateHostOnly() { return std::make_unique<HostOnlyImpl>(); }

}  // namespace memra::kernels::cuda
