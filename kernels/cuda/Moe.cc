// Units of the MoE layer (ir/Ops.def moe_route, moe_experts, moe_ffn, moe_ffn_ungated, gated_add):
// the routing and the combine of kernels/cuda/Moe.cu around the expert products. moe_ffn_ungated
// (Step 3.5's shared expert, no gate) runs the same launches as moe_ffn with the shared output's
// weight 1 (no gate pointer: no sigmoid(x . g), no gate scratch).
//
// Decode (T <= 8 tokens, every expert matrix in GGUF blocks GemvQuant.cu reads): per layer
//   gemv_q_quantize_x(x) -> gemv_q_moe_swiglu (the k chosen experts' gate/up of every token and the
//   shared expert's, one launch; also sigmoid(x . g) of the shared gate) -> gemv_q_quantize_x(h)
//   -> gemv_q_moe_down (the down products, shared included, and the weighted sum in choice order
//   plus the sigmoid-gated shared output: y written once),
// the experts read from the ids moe_route wrote on the device (no host round trip, so the step is
// one captured graph). A shared expert whose formats or width differ from the routed ones gets
// launches of its own (the same kernels with no routed slots); the downs then write every slot's
// output and moe_combine sums them.
//
// Prefill (any T; every storage MoeGemm.cu reads, so also the f32 / f16 / bf16 experts at T <= 8):
//   moe_sort (the T k slots grouped by expert, on the device) -> moe_gemm swiglu (grouped) and the
//   shared expert's (the identity grouping) -> moe_gemm down (grouped) and the shared one's ->
//   moe_combine. Numerics: the dense prefill's (bf16 weights and activations, f32 accumulation).
//
// Expert parallelism (expert_parts P, shard-tensor-parallel): the stacks hold this rank's E of the
// router's E P experts, from first = (rank P / ranks) E (BindContext's rank; the CPU executor's
// rule). Every kernel above takes first / n_routed: a slot of another rank's expert copies no
// weights and adds nothing (its rows are not written), so y is this rank's partial sum; an id
// outside [0, E P) still makes its token's row NaN.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GemvQuantParams.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/MoeGemm.h"
#include "kernels/cuda/MoeParams.h"
#include "kernels/cuda/MoeRoute.h"
#include "kernels/cuda/Q8Companion.h"

namespace memra::kernels::cuda {
namespace {

constexpr const char* kFile = "Moe.cu";
// Past this many tokens each slot re-reading its expert's rows (the GEMV's way) loses to grouping
// the slots by expert (MoeGemm.cu's tensor-core products).
constexpr int64_t kMaxDecodeTokens = 8;
// Decode's down products and the weighted sum in one launch (gemv_q_moe_down: a tile runs over a
// token's k choices and the shared down), the shared gate's dot in the gate/up launch; applies
// when the shared down shares the routed downs' launch and its gate vector is f32 (every GGUF's).
// false: the down launch writes every slot's output and moe_combine sums them.
constexpr bool kFusedDown = true;

int64_t Align256(int64_t b) { return (b + 255) / 256 * 256; }

// ---- moe_route ----

// The experts' gate activation on the gate-up launch: GELU experts (Gemma 4) set `gelu_define`
// (GQ_GELU / MG_GELU), clamped SwiGLU experts (Step 3.5) their limit; plain SiLU ones keep the
// module as it was (no define, the same cache key).
std::optional<Launch> WithGateActivation(std::optional<Launch> l, const ir::Op& op, const char* gelu_define) {
  if (l) {
    AddFlagDefine(*l, gelu_define, GeluGate(op));
    AddGluClampDefine(*l, op);
  }
  return l;
}
absl::StatusOr<Launch> WithGateActivation(absl::StatusOr<Launch> l, const ir::Op& op, const char* gelu_define) {
  if (l.ok()) {
    AddFlagDefine(*l, gelu_define, GeluGate(op));
    AddGluClampDefine(*l, op);
  }
  return l;
}

class MoeRouteImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "moe_route"; }
  // Softmax routing (moe_route) and Step 3.5's sigmoid routing (moe_route_sigmoid): one module each.
  bool Implements(ir::OpKind k) const override {
    return k == ir::OpKind::kMoeRoute || k == ir::OpKind::kMoeRouteSigmoid;
  }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const std::vector<int64_t>& l = c.shapes.in[0];
    const int64_t E = l.back(), T = Numel(l) / std::max<int64_t>(E, 1);
    if (c.shapes.in_dtypes[0] != ir::DType::kF32) return Unsupported(c.op, "moe_route reads f32 logits");
    const bool sigmoid = c.op.is(ir::OpKind::kMoeRouteSigmoid);
    MEMRA_ASSIGN_OR_RETURN(Launch l0, MoeRouteLaunch(c.op, c.target, E, c.op.attrs().I64Or("k", 0), sigmoid,
                                                     sigmoid && c.op.attrs().I64Or("norm", 0) != 0, T));
    OpSelection s;
    s.launches.push_back(std::move(l0));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto l, c.InShape(0));
    MoeRouteParams p{};
    p.logits = c.In(0);
    p.weights = c.Out(0);
    p.ids = c.Out(1);
    p.expert_scale = c.op().num_operands() > 1 ? c.In(1) : 0;
    p.n_tok = static_cast<int>(Numel(l) / l.back());
    p.scale = RouteScale(c.op(), c.op().is(ir::OpKind::kMoeRouteSigmoid));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// ---- gated_add ----

class GatedAddImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gated_add"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kGatedAdd; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    for (int i = 0; i < 3; ++i)
      if (c.shapes.in_dtypes[i] != ir::DType::kF32) return Unsupported(c.op, "gated_add reads f32 operands");
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, "gated_add_f32", Numel(c.shapes.in[0])));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto a, c.InShape(0));
    GatedAddParams p{};
    p.a = c.In(0);
    p.b = c.In(1);
    p.g = c.In(2);
    p.y = c.Out(0);
    p.n = a.back();
    p.rows = Numel(a) / std::max<int64_t>(p.n, 1);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// ---- the expert products ----

// Operand indices of moe_ffn / moe_ffn_ungated / moe_experts (ir/Ops.def); -1 where the op has
// none.
struct MoeOperands {
  unsigned x = 0, weights = 1, ids = 2;
  int sh_gate_inp = -1, sh_gate = -1, sh_up = -1, sh_down = -1;
  unsigned down = 0, gate = 0;
  int up = -1;  // -1: gate is the fused [E, 2F, K] gate_up
  bool shared() const { return sh_gate >= 0; }
  bool gated() const { return sh_gate_inp >= 0; }  // the shared output weighted by sigmoid(x . g)
};

MoeOperands OperandsOf(const ir::Op& op) {
  MoeOperands o;
  unsigned base = 3;
  if (op.kind() == ir::OpKind::kMoeFfn) {
    o.sh_gate_inp = 3, o.sh_gate = 4, o.sh_up = 5, o.sh_down = 6;
    base = 7;
  } else if (op.kind() == ir::OpKind::kMoeFfnUngated) {
    o.sh_gate = 3, o.sh_up = 4, o.sh_down = 5;
    base = 6;
  }
  o.down = base;
  o.gate = base + 1;
  if (op.num_operands() > base + 2) o.up = static_cast<int>(base + 2);
  return o;
}

// The sizes of one call (E experts of width F over K, k chosen, a shared expert of width Fs).
struct MoeDims {
  int64_t T = 0, K = 0, E = 0, F = 0, k = 0, Fs = 0;
};

// Expert parallelism (ir/Ops.def moe_experts expert_parts, shard-tensor-parallel): the weights
// hold this rank's E experts, [first, first + E) of the router's `routed` = E * parts (the CPU
// executor's rule); the kernels skip the slots of other ranks' experts, so this rank's result is
// its partial sum. Without parts: first 0, routed E.
struct ExpertRange {
  int64_t first = 0, routed = 0, parts = 1;
};

absl::StatusOr<ExpertRange> ExpertRangeOf(const BindContext& c, const MoeDims& d) {
  ExpertRange r;
  r.parts = c.op().attrs().I64Or("expert_parts", 1);
  const int64_t ranks = c.tp_size(), rank = c.tp_rank();
  if (r.parts < 1 || (r.parts > 1 && (ranks < 1 || (ranks % r.parts != 0 && r.parts % ranks != 0))))
    return BindError(c.op(), absl::StrCat(r.parts, " expert parts on a group of ", ranks, " ranks"));
  r.routed = d.E * r.parts;
  if (r.parts > 1) r.first = rank * r.parts / ranks * d.E;
  return r;
}

absl::StatusOr<MoeDims> DimsOf(const ir::Op& op, const MoeOperands& o, const std::vector<std::vector<int64_t>>& in) {
  MoeDims d;
  const std::vector<int64_t>& x = in[o.x];
  const std::vector<int64_t>& dn = in[o.down];
  if (x.empty() || dn.size() != 3 || in[o.weights].empty())
    return Unsupported(op, "expects x [T, K], w_down [E, K, F]");
  if (in[o.weights].back() > 32)  // moe_combine's per-token choice mask
    return Unsupported(op, absl::StrCat(in[o.weights].back(), " experts per token (at most 32)"));
  d.K = x.back();
  d.T = Numel(x) / std::max<int64_t>(d.K, 1);
  d.E = dn[0];
  d.F = dn[2];
  d.k = in[o.weights].back();
  if (o.shared()) d.Fs = in[o.sh_gate][0];
  return d;
}

// moe_combine's launch: blocks of 256 threads over (token, 1024 columns).
Launch CombineLaunch(const ir::Op& op, const MoeOperands& o, const MoeDims& d) {
  Launch comb;
  comb.kernel.module.file = kFile;
  comb.kernel.module.defines =
      MakeDefines({Def("MC_G", o.gated() ? StorageCode(op.operand(o.sh_gate_inp)->dtype()) : 0)});
  comb.kernel.entry = "moe_combine";
  comb.block = 256;
  comb.grid = static_cast<uint32_t>((d.K + 1023) / 1024 * d.T);
  return comb;
}

// One call's matrices as the device holds them: the routed experts (up0: the up projection of
// expert 0, the second half of each expert's rows in a fused gate_up), the shared expert's.
struct ExpertMatrices {
  DeviceMatrix down, gate, sh_gate, sh_up, sh_down, sh_gate_inp;
  uint64_t up0 = 0;
  int64_t gate_expert = 0, down_expert = 0;  // bytes from one expert to the next
};

absl::StatusOr<ExpertMatrices> MatricesOf(const BindContext& c, const MoeOperands& o, const MoeDims& d) {
  ExpertMatrices m;
  MEMRA_ASSIGN_OR_RETURN(m.down, c.Matrix(o.down));
  MEMRA_ASSIGN_OR_RETURN(m.gate, c.Matrix(o.gate));
  for (const DeviceMatrix* x : {&m.down, &m.gate})
    if (x->rows % d.E != 0)
      return BindError(c.op(), absl::StrCat("an expert matrix has ", x->rows, " rows, not a multiple of ", d.E));
  m.gate_expert = m.gate.rows / d.E * m.gate.row_bytes();
  m.down_expert = m.down.rows / d.E * m.down.row_bytes();
  m.up0 = m.gate.data + static_cast<uint64_t>(d.F * m.gate.row_bytes());
  if (o.up >= 0) {
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix up, c.Matrix(static_cast<unsigned>(o.up)));
    m.up0 = up.data;
  }
  if (o.shared()) {
    MEMRA_ASSIGN_OR_RETURN(m.sh_gate, c.Matrix(static_cast<unsigned>(o.sh_gate)));
    MEMRA_ASSIGN_OR_RETURN(m.sh_up, c.Matrix(static_cast<unsigned>(o.sh_up)));
    MEMRA_ASSIGN_OR_RETURN(m.sh_down, c.Matrix(static_cast<unsigned>(o.sh_down)));
  }
  if (o.gated()) {
    MEMRA_ASSIGN_OR_RETURN(m.sh_gate_inp, c.Matrix(static_cast<unsigned>(o.sh_gate_inp)));
  }
  return m;
}

// The call's tokens (at most the selection's bucket T) and its scratch (at least `bytes`).
absl::StatusOr<int64_t> CallTokens(const BindContext& c, const MoeOperands& o, const MoeDims& d, int64_t bytes) {
  MEMRA_ASSIGN_OR_RETURN(auto xs, c.InShape(o.x));
  const int64_t n_tok = Numel(xs) / d.K;
  if (n_tok < 1 || n_tok > d.T) return BindError(c.op(), absl::StrCat(n_tok, " tokens, selected for at most ", d.T));
  if (c.Scratch() == 0 || c.selection().scratch_bytes < bytes) return BindError(c.op(), "no scratch for the experts");
  return n_tok;
}

// y = sum_i weights[t, i] o[t k + i] (+ os[t] sigmoid(x[t] . g), or + os[t] ungated).
void BindCombine(const BindContext& c, DeviceWork& w, int launch, const MoeOperands& o, const MoeDims& d,
                 const ExpertRange& r, const ExpertMatrices& m, int64_t n_tok, uint64_t out, uint64_t os) {
  MoeCombineParams cp{};
  cp.o = out;
  cp.weights = c.In(o.weights);
  cp.y = c.Out(0);
  cp.n_tok = static_cast<int>(n_tok);
  cp.n = static_cast<int>(d.K);
  cp.k = static_cast<int>(d.k);
  cp.ids = c.In(o.ids);
  cp.n_experts = static_cast<int>(d.E);
  cp.first_expert = static_cast<int>(r.first);
  cp.n_routed = static_cast<int>(r.routed);
  if (o.shared()) {
    cp.ys = os;
    cp.x = c.In(o.x);
    if (o.gated()) cp.g = m.sh_gate_inp.data;  // else 0: the shared output's weight is 1
  }
  w.Kernel(static_cast<uint32_t>(launch), cp);
}

// The decode plan: launches in order and the scratch they share. One pure function of the op and
// its bucket shapes, so Select and Bind agree.
struct DecodePlan {
  MoeDims d;
  int64_t S = 0;                 // routed slots (T * k at the bucket)
  bool shared_gu_apart = false;  // the shared gate/up in a launch of their own (other format)
  bool shared_h_apart = false;   // the shared h in its own buffer (Fs != F)
  bool shared_dn_apart = false;  // the shared down in a launch of its own
  bool fused_down = false;       // gemv_q_moe_down (no moe_combine, no o scratch)
  bool x_written = false;        // x's q8 companion is the gate/up's xq (no l_xq launch)
  int64_t h_rows = 0;            // rows of the h buffer (S, + T when the shared h sits below)
  // scratch offsets
  int64_t xq = 0, h = 0, hs = 0, hq = 0, hsq = 0, o = 0, gate = 0, bytes = 0;
  // launch indices (-1: none)
  int l_xq = -1, l_gu = -1, l_gu_sh = -1, l_hq = -1, l_hsq = -1, l_dn = -1, l_dn_sh = -1, l_comb = -1;
  int n_launches = 0;
  std::vector<Launch> launches;  // with a target
};

// `target` null: the layout and launch indices only (Bind), no launch records.
absl::StatusOr<std::optional<DecodePlan>> PlanDecode(const ir::Op& op, const OpShapes& shapes, const Target* target) {
  const MoeOperands o = OperandsOf(op);
  MEMRA_ASSIGN_OR_RETURN(const MoeDims d, DimsOf(op, o, shapes.in));
  if (d.T < 1 || d.T > kMaxDecodeTokens) return std::optional<DecodePlan>();
  std::vector<unsigned> mats = {o.down, o.gate};
  if (o.up >= 0) mats.push_back(static_cast<unsigned>(o.up));
  if (o.shared()) mats.insert(mats.end(), {unsigned(o.sh_gate), unsigned(o.sh_up), unsigned(o.sh_down)});
  for (unsigned i : mats)
    if (!GemvQuantBlocksOnDevice(op.operand(i)->dtype(), shapes.layout(i))) return std::optional<DecodePlan>();
  const ir::DType gate_t = op.operand(o.gate)->dtype();
  if (o.up >= 0 && op.operand(o.up)->dtype() != gate_t) return std::optional<DecodePlan>();
  if (o.shared() && op.operand(o.sh_up)->dtype() != op.operand(o.sh_gate)->dtype()) return std::optional<DecodePlan>();
  if (o.gated() && StorageCode(op.operand(o.sh_gate_inp)->dtype()) < 0)
    return Unsupported(op, absl::StrCat("the shared expert's gate @", op.operand(o.sh_gate_inp)->name(), " is ",
                                        ir::DTypeName(op.operand(o.sh_gate_inp)->dtype()), " (f32, f16 or bf16 only)"));

  DecodePlan p;
  p.d = d;
  p.S = d.T * d.k;
  const ir::DType down_t = op.operand(o.down)->dtype();
  if (o.shared()) {
    p.shared_gu_apart = op.operand(o.sh_gate)->dtype() != gate_t;
    p.shared_h_apart = d.Fs != d.F;
    p.shared_dn_apart = p.shared_h_apart || op.operand(o.sh_down)->dtype() != down_t;
  }
  const int64_t Tsh = o.shared() ? d.T : 0;
  p.h_rows = p.S + (o.shared() && !p.shared_h_apart ? d.T : 0);
  p.fused_down =
      kFusedDown && !p.shared_dn_apart && (!o.gated() || op.operand(o.sh_gate_inp)->dtype() == ir::DType::kF32);
  // Scratch: xq | h (| hs) | hq (| hsq) | o (routed S rows, then the shared T rows).
  int64_t at = 0;
  auto take = [&](int64_t b) {
    const int64_t off = at;
    at += Align256(b);
    return off;
  };
  // x's producer writes it as q8 too (Q8Companion.h): no quantizing launch, no scratch for it.
  const std::optional<Q8Companion> companion = Q8CompanionOfValue(*op.operand(o.x));
  p.x_written = companion && companion->elems == d.T * d.K;
  if (!p.x_written) p.xq = take(GemvQuantXBytes(d.T, d.K));
  p.h = take(p.h_rows * d.F * 4);
  if (p.shared_h_apart) p.hs = take(d.T * d.Fs * 4);
  p.hq = take(GemvQuantXBytes(p.h_rows, d.F));
  if (p.shared_h_apart) p.hsq = take(GemvQuantXBytes(d.T, d.Fs));
  if (p.fused_down) {
    if (o.gated()) p.gate = take(d.T * 4);
  } else {
    p.o = take((p.S + Tsh) * d.K * 4);
  }
  p.bytes = at;

  int n_launches = 0;
  auto add = [&](auto make) -> absl::StatusOr<int> {
    if (target != nullptr) {
      std::optional<Launch> l = make(*target);
      if (!l) return Unsupported(op, "no GemvQuant.cu launch for these expert shapes");
      p.launches.push_back(*std::move(l));
    }
    return n_launches++;
  };
  if (!p.x_written) {
    MEMRA_ASSIGN_OR_RETURN(p.l_xq,
                           add([&](const Target& t) { return std::optional<Launch>(GemvQuantXLaunch(t, d.K, d.T)); }));
  }
  const int64_t gu_sh_rows = o.shared() && !p.shared_gu_apart ? d.T : 0;
  MEMRA_ASSIGN_OR_RETURN(p.l_gu, add([&](const Target& t) {
                           return WithGateActivation(
                               GemvQuantMoeLaunch(t, gate_t, d.K, d.T, true, p.S, d.F, gu_sh_rows, d.Fs), op,
                               "GQ_GELU");
                         }));
  if (p.shared_gu_apart) {
    MEMRA_ASSIGN_OR_RETURN(
        p.l_gu_sh, add([&](const Target& t) {
          // moe_ffn_ungated's clamp is the shared expert's too.
          return WithGateActivation(
              GemvQuantMoeLaunch(t, op.operand(o.sh_gate)->dtype(), d.K, d.T, true, 0, d.F, d.T, d.Fs), op, "GQ_GELU");
        }));
  }
  MEMRA_ASSIGN_OR_RETURN(
      p.l_hq, add([&](const Target& t) { return std::optional<Launch>(GemvQuantXLaunch(t, d.F, p.h_rows)); }));
  if (p.shared_h_apart) {
    MEMRA_ASSIGN_OR_RETURN(p.l_hsq,
                           add([&](const Target& t) { return std::optional<Launch>(GemvQuantXLaunch(t, d.Fs, d.T)); }));
  }
  const int64_t dn_sh_rows = o.shared() && !p.shared_dn_apart ? d.T : 0;
  if (p.fused_down) {
    MEMRA_ASSIGN_OR_RETURN(
        p.l_dn, add([&](const Target& t) { return GemvQuantMoeDownLaunch(t, down_t, d.F, p.h_rows, d.T, d.K); }));
    p.n_launches = n_launches;
    return std::optional<DecodePlan>(std::move(p));
  }
  MEMRA_ASSIGN_OR_RETURN(p.l_dn, add([&](const Target& t) {
                           return GemvQuantMoeLaunch(t, down_t, d.F, p.h_rows, false, p.S, d.K, dn_sh_rows, d.K);
                         }));
  if (p.shared_dn_apart) {
    const int64_t x_rows = p.shared_h_apart ? d.T : p.h_rows;
    MEMRA_ASSIGN_OR_RETURN(p.l_dn_sh, add([&](const Target& t) {
                             return GemvQuantMoeLaunch(t, op.operand(o.sh_down)->dtype(), p.shared_h_apart ? d.Fs : d.F,
                                                       x_rows, false, 0, d.K, d.T, d.K);
                           }));
  }
  MEMRA_ASSIGN_OR_RETURN(p.l_comb, add([&](const Target&) { return std::optional<Launch>(CombineLaunch(op, o, d)); }));
  p.n_launches = n_launches;
  return std::optional<DecodePlan>(std::move(p));
}

class MoeDecodeImpl : public GpuOpImpl {
 public:
  MoeDecodeImpl(absl::string_view name, ir::OpKind kind) : name_(name), kind_(kind) {}
  absl::string_view name() const override { return name_; }
  bool Implements(ir::OpKind k) const override { return k == kind_; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_ASSIGN_OR_RETURN(std::optional<DecodePlan> p, PlanDecode(c.op, c.shapes, &c.target));
    if (!p) return std::optional<OpSelection>();
    OpSelection s;
    s.gemv = true;
    s.launches = std::move(p->launches);
    s.scratch_bytes = p->bytes;
    return std::optional<OpSelection>(std::move(s));
  }

  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    const ir::Op& op = c.op();
    MEMRA_ASSIGN_OR_RETURN(std::optional<DecodePlan> plan, PlanDecode(op, c.shapes(), nullptr));
    if (!plan || static_cast<size_t>(plan->n_launches) != c.selection().launches.size())
      return BindError(op, "moe decode: stale selection (launches)");
    const DecodePlan& p = *plan;
    const MoeOperands o = OperandsOf(op);
    MEMRA_ASSIGN_OR_RETURN(const int64_t n_tok, CallTokens(c, o, p.d, p.bytes));
    const int64_t S = n_tok * p.d.k;
    const uint64_t scratch = c.Scratch();
    MEMRA_ASSIGN_OR_RETURN(const ExpertMatrices m, MatricesOf(c, o, p.d));
    MEMRA_ASSIGN_OR_RETURN(const ExpertRange r, ExpertRangeOf(c, p.d));
    const double mine = 1.0 / static_cast<double>(r.parts);  // the expected share of slots this rank runs
    const DeviceMatrix &down = m.down, &gate = m.gate, &sg = m.sh_gate, &su = m.sh_up, &sd = m.sh_down;
    const uint64_t up0 = m.up0;
    const int64_t gate_expert = m.gate_expert;
    const uint64_t xq = p.x_written ? Q8CompanionAddress(c, static_cast<unsigned>(o.x)).value_or(0) : scratch + p.xq;
    const uint64_t h = scratch + p.h, hq = scratch + p.hq, out = scratch + p.o;
    if (xq == 0) return BindError(op, "moe decode: x has no q8 companion (a stale selection)");
    const uint64_t hs = o.shared() ? (p.shared_h_apart ? scratch + p.hs : h + S * p.d.F * 4) : 0;
    const uint64_t hsq = p.shared_h_apart ? scratch + p.hsq : 0;
    const uint64_t os = out + static_cast<uint64_t>(S * p.d.K * 4);

    auto quantize = [&](int l, uint64_t x, uint64_t q, int64_t rows) {
      GemvQuantXParams qp{};
      qp.x = x;
      qp.xq = q;
      qp.n_tok = static_cast<int>(rows);
      w.Kernel(static_cast<uint32_t>(l), qp);
    };
    // The h rows the down launch quantizes: the routed slots, then (shared h below them) the shared rows.
    const int64_t h_rows = S + (o.shared() && !p.shared_h_apart ? n_tok : 0);

    if (p.l_xq >= 0) quantize(p.l_xq, c.In(o.x), xq, n_tok);
    {
      GemvQuantMoeParams g{};
      g.w0 = gate.data;
      g.w1 = up0;
      g.y = h;
      g.x = c.In(o.x);
      g.xq = xq;
      g.ids = c.In(o.ids);
      g.expert_bytes = gate_expert;
      g.n = static_cast<int>(p.d.F);
      g.n_slots = static_cast<int>(S);
      g.k = static_cast<int>(p.d.k);
      g.n_tok = static_cast<int>(n_tok);
      g.n_experts = static_cast<int>(p.d.E);
      g.first_expert = static_cast<int>(r.first);
      g.n_routed = static_cast<int>(r.routed);
      if (o.shared() && !p.shared_gu_apart) g.s0 = sg.data, g.s1 = su.data, g.ys = hs, g.ns = static_cast<int>(p.d.Fs);
      if (o.gated() && p.fused_down) g.g = m.sh_gate_inp.data, g.gate = scratch + p.gate;  // sigmoid(x . g)
      w.Kernel(static_cast<uint32_t>(p.l_gu), g);
      w.Count(2.0 * 2 * S * p.d.F * p.d.K * mine, 2.0 * p.d.F * gate.row_bytes() * S * mine);
      if (p.shared_gu_apart) {
        GemvQuantMoeParams gs = g;
        gs.n_slots = 0;
        gs.s0 = sg.data, gs.s1 = su.data, gs.ys = hs, gs.ns = static_cast<int>(p.d.Fs);
        w.Kernel(static_cast<uint32_t>(p.l_gu_sh), gs);
      }
      if (o.shared()) w.Count(2.0 * 2 * n_tok * p.d.Fs * p.d.K, static_cast<double>(sg.bytes + su.bytes));
    }
    quantize(p.l_hq, h, hq, h_rows);
    if (p.shared_h_apart) quantize(p.l_hsq, hs, hsq, n_tok);
    if (p.fused_down) {
      GemvQuantMoeParams g{};
      g.w0 = down.data;
      g.y = c.Out(0);
      g.x = h;
      g.xq = hq;
      g.ids = c.In(o.ids);
      g.wts = c.In(o.weights);
      g.expert_bytes = m.down_expert;
      g.n = static_cast<int>(p.d.K);
      g.n_slots = static_cast<int>(S);
      g.k = static_cast<int>(p.d.k);
      g.n_tok = static_cast<int>(n_tok);
      g.n_experts = static_cast<int>(p.d.E);
      g.first_expert = static_cast<int>(r.first);
      g.n_routed = static_cast<int>(r.routed);
      // The shared down's weight: sigmoid(x . g) from the gate/up launch, or 1 (no gate pointer).
      if (o.shared()) g.s0 = sd.data, g.xs0 = static_cast<int>(S);
      if (o.gated()) g.gate = scratch + p.gate;
      w.Kernel(static_cast<uint32_t>(p.l_dn), g);
      w.Count(2.0 * S * p.d.F * p.d.K * mine, static_cast<double>(p.d.K * down.row_bytes() * S) * mine);
      if (o.shared()) w.Count(2.0 * n_tok * p.d.Fs * p.d.K, static_cast<double>(sd.bytes));
      return absl::OkStatus();
    }
    {
      GemvQuantMoeParams g{};
      g.w0 = down.data;
      g.y = out;
      g.x = h;
      g.xq = hq;
      g.ids = c.In(o.ids);
      g.expert_bytes = m.down_expert;
      g.n = static_cast<int>(p.d.K);
      g.n_slots = static_cast<int>(S);
      g.k = 1;
      g.n_tok = static_cast<int>(n_tok);
      g.n_experts = static_cast<int>(p.d.E);
      g.first_expert = static_cast<int>(r.first);
      g.n_routed = static_cast<int>(r.routed);
      if (o.shared() && !p.shared_dn_apart)
        g.s0 = sd.data, g.ys = os, g.ns = static_cast<int>(p.d.K), g.xs0 = static_cast<int>(S);
      w.Kernel(static_cast<uint32_t>(p.l_dn), g);
      w.Count(2.0 * S * p.d.F * p.d.K * mine, static_cast<double>(p.d.K * down.row_bytes() * S) * mine);
      if (p.shared_dn_apart) {
        GemvQuantMoeParams gs{};
        gs.w0 = down.data;
        gs.ids = c.In(o.ids);
        gs.n_experts = static_cast<int>(p.d.E);
        gs.first_expert = static_cast<int>(r.first);
        gs.n_routed = static_cast<int>(r.routed);
        gs.k = 1;
        gs.n_tok = static_cast<int>(n_tok);
        gs.s0 = sd.data;
        gs.ys = os;
        gs.ns = static_cast<int>(p.d.K);
        gs.x = p.shared_h_apart ? hs : h;
        gs.xq = p.shared_h_apart ? hsq : hq;
        gs.xs0 = p.shared_h_apart ? 0 : static_cast<int>(S);
        w.Kernel(static_cast<uint32_t>(p.l_dn_sh), gs);
      }
      if (o.shared()) w.Count(2.0 * n_tok * p.d.Fs * p.d.K, static_cast<double>(sd.bytes));
    }
    BindCombine(c, w, p.l_comb, o, p.d, r, m, n_tok, out, os);
    return absl::OkStatus();
  }

 private:
  absl::string_view name_;
  ir::OpKind kind_;
};

// ---- prefill: grouped tensor-core products ----

struct GroupedPlan {
  MoeDims d;
  int64_t S = 0;  // max slots (T * k at the bucket)
  int64_t sort = 0, h = 0, hs = 0, o = 0, os = 0, bytes = 0;
  int l_sort = 0, l_gu = 1, l_gu_sh = -1, l_dn = -1, l_dn_sh = -1, l_comb = -1;
  std::vector<Launch> launches;  // with a target
  int n_launches = 0;
};

absl::StatusOr<std::optional<GroupedPlan>> PlanGrouped(const ir::Op& op, const OpShapes& shapes, const Target* target) {
  const MoeOperands o = OperandsOf(op);
  MEMRA_ASSIGN_OR_RETURN(const MoeDims d, DimsOf(op, o, shapes.in));
  if (d.T < 1) return std::optional<GroupedPlan>();
  std::vector<unsigned> mats = {o.down, o.gate};
  if (o.up >= 0) mats.push_back(static_cast<unsigned>(o.up));
  if (o.shared()) mats.insert(mats.end(), {unsigned(o.sh_gate), unsigned(o.sh_up), unsigned(o.sh_down)});
  for (unsigned i : mats) {
    const WeightLayout* l = shapes.layout(i);
    const ir::DType t = op.operand(i)->dtype();
    if (l == nullptr || !MoeGemmReads(t) ||
        !(l->kind == WeightLayoutKind::kBlocks || l->kind == WeightLayoutKind::kAsStored))
      return std::optional<GroupedPlan>();
  }
  if (o.up >= 0 && op.operand(o.up)->dtype() != op.operand(o.gate)->dtype()) return std::optional<GroupedPlan>();
  if (o.shared() && op.operand(o.sh_up)->dtype() != op.operand(o.sh_gate)->dtype()) return std::optional<GroupedPlan>();
  if (o.gated() && StorageCode(op.operand(o.sh_gate_inp)->dtype()) < 0)
    return Unsupported(op, absl::StrCat("the shared expert's gate @", op.operand(o.sh_gate_inp)->name(), " is ",
                                        ir::DTypeName(op.operand(o.sh_gate_inp)->dtype()), " (f32, f16 or bf16 only)"));
  GroupedPlan p;
  p.d = d;
  p.S = d.T * d.k;
  int64_t at = 0;
  auto take = [&](int64_t b) {
    const int64_t off = at;
    at += Align256(b);
    return off;
  };
  p.sort = take(MoeSortScratchBytes(d.E, p.S));
  p.h = take(p.S * d.F * 4);
  if (o.shared()) p.hs = take(d.T * d.Fs * 4);
  p.o = take(p.S * d.K * 4);
  if (o.shared()) p.os = take(d.T * d.K * 4);
  p.bytes = at;
  int n = 0;
  auto add = [&](auto make) -> absl::StatusOr<int> {
    if (target != nullptr) {
      absl::StatusOr<Launch> l = make(*target);
      if (!l.ok()) return Unsupported(op, l.status().message());
      p.launches.push_back(*std::move(l));
    }
    return n++;
  };
  const ir::DType gate_t = op.operand(o.gate)->dtype(), down_t = op.operand(o.down)->dtype();
  MEMRA_ASSIGN_OR_RETURN(p.l_sort, add([&](const Target& t) { return MoeSortLaunch(t, d.E, p.S); }));
  MEMRA_ASSIGN_OR_RETURN(p.l_gu, add([&](const Target& t) {
                           return WithGateActivation(MoeGemmLaunch(t, gate_t, d.K, d.F, d.E, p.S, true, true), op,
                                                     "MG_GELU");
                         }));
  if (o.shared()) {
    const ir::DType sg = op.operand(o.sh_gate)->dtype();
    MEMRA_ASSIGN_OR_RETURN(p.l_gu_sh, add([&](const Target& t) {
                             return WithGateActivation(MoeGemmLaunch(t, sg, d.K, d.Fs, 1, d.T, true, false), op,
                                                       "MG_GELU");
                           }));
  }
  MEMRA_ASSIGN_OR_RETURN(
      p.l_dn, add([&](const Target& t) { return MoeGemmLaunch(t, down_t, d.F, d.K, d.E, p.S, false, true); }));
  if (o.shared()) {
    const ir::DType sd = op.operand(o.sh_down)->dtype();
    MEMRA_ASSIGN_OR_RETURN(p.l_dn_sh,
                           add([&](const Target& t) { return MoeGemmLaunch(t, sd, d.Fs, d.K, 1, d.T, false, false); }));
  }
  MEMRA_ASSIGN_OR_RETURN(p.l_comb, add([&](const Target&) { return absl::StatusOr<Launch>(CombineLaunch(op, o, d)); }));
  p.n_launches = n;
  return std::optional<GroupedPlan>(std::move(p));
}

class MoeGroupedImpl : public GpuOpImpl {
 public:
  MoeGroupedImpl(absl::string_view name, ir::OpKind kind) : name_(name), kind_(kind) {}
  absl::string_view name() const override { return name_; }
  bool Implements(ir::OpKind k) const override { return k == kind_; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_ASSIGN_OR_RETURN(std::optional<GroupedPlan> p, PlanGrouped(c.op, c.shapes, &c.target));
    if (!p) return std::optional<OpSelection>();
    OpSelection s;
    s.gemm = true;
    s.launches = std::move(p->launches);
    s.scratch_bytes = p->bytes;
    return std::optional<OpSelection>(std::move(s));
  }

  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    const ir::Op& op = c.op();
    MEMRA_ASSIGN_OR_RETURN(std::optional<GroupedPlan> plan, PlanGrouped(op, c.shapes(), nullptr));
    if (!plan || static_cast<size_t>(plan->n_launches) != c.selection().launches.size())
      return BindError(op, "moe grouped: stale selection (launches)");
    const GroupedPlan& p = *plan;
    const MoeOperands o = OperandsOf(op);
    MEMRA_ASSIGN_OR_RETURN(const int64_t n_tok, CallTokens(c, o, p.d, p.bytes));
    const int64_t S = n_tok * p.d.k;
    const uint64_t scratch = c.Scratch();
    MEMRA_ASSIGN_OR_RETURN(const ExpertMatrices m, MatricesOf(c, o, p.d));
    MEMRA_ASSIGN_OR_RETURN(const ExpertRange r, ExpertRangeOf(c, p.d));
    const DeviceMatrix &down = m.down, &gate = m.gate;
    const uint64_t sort = scratch + p.sort, h = scratch + p.h, out = scratch + p.o;
    BindMoeSort(w, static_cast<uint32_t>(p.l_sort), c.In(o.ids), S, p.d.E, p.S, sort, r.first);
    MoeGemmArgs gu;
    gu.a = c.In(o.x);
    gu.a_row_div = p.d.k;
    gu.w0 = gate.data;
    gu.w1 = m.up0;
    gu.expert_bytes = m.gate_expert;
    gu.row_bytes = gate.row_bytes();
    gu.y = h;
    gu.n_slots = S;
    gu.max_slots = p.S;
    gu.N = p.d.F;
    gu.K = p.d.K;
    gu.E = p.d.E;
    gu.sort_scratch = sort;
    BindMoeGemm(w, static_cast<uint32_t>(p.l_gu), gu);
    if (o.shared()) {
      MoeGemmArgs s;
      s.a = c.In(o.x);
      s.w0 = m.sh_gate.data;
      s.w1 = m.sh_up.data;
      s.row_bytes = m.sh_gate.row_bytes();
      s.y = scratch + p.hs;
      s.n_slots = n_tok;
      s.max_slots = p.d.T;
      s.N = p.d.Fs;
      s.K = p.d.K;
      BindMoeGemm(w, static_cast<uint32_t>(p.l_gu_sh), s);
    }
    MoeGemmArgs dn;
    dn.a = h;
    dn.w0 = down.data;
    dn.expert_bytes = m.down_expert;
    dn.row_bytes = down.row_bytes();
    dn.y = out;
    dn.n_slots = S;
    dn.max_slots = p.S;
    dn.N = p.d.K;
    dn.K = p.d.F;
    dn.E = p.d.E;
    dn.sort_scratch = sort;
    BindMoeGemm(w, static_cast<uint32_t>(p.l_dn), dn);
    if (o.shared()) {
      MoeGemmArgs s;
      s.a = scratch + p.hs;
      s.w0 = m.sh_down.data;
      s.row_bytes = m.sh_down.row_bytes();
      s.y = scratch + p.os;
      s.n_slots = n_tok;
      s.max_slots = p.d.T;
      s.N = p.d.K;
      s.K = p.d.Fs;
      BindMoeGemm(w, static_cast<uint32_t>(p.l_dn_sh), s);
    }
    BindCombine(c, w, p.l_comb, o, p.d, r, m, n_tok, out, scratch + p.os);
    return absl::OkStatus();
  }

 private:
  absl::string_view name_;
  ir::OpKind kind_;
};

}  // namespace

absl::StatusOr<Defines> RouteDefines(const ir::Op& op, int64_t E, int64_t k, bool sigmoid, bool norm) {
  if (E < 1 || E > kMaxRouteExperts)
    return Unsupported(op, absl::StrCat("the routing takes 1..", kMaxRouteExperts, " experts, not ", E));
  if (k < 1 || k > std::min<int64_t>(E, 32))
    return Unsupported(op, absl::StrCat("the routing takes k in 1..min(E, 32), not ", k));
  Defines d = {Def("MR_E", E), Def("MR_K", k)};
  // The flags only when set: a softmax routing keeps its module (and cache key) of before.
  if (sigmoid) d.push_back(Def("MR_SIGMOID", 1));
  if (sigmoid && norm) d.push_back(Def("MR_NORM", 1));
  return MakeDefines(std::move(d));
}

float RouteScale(const ir::Op& op, bool sigmoid) {
  const double scale = op.attrs().F64Or("scale", 0.0);
  return sigmoid && scale != 0.0 ? static_cast<float>(scale) : 1.0f;
}

absl::StatusOr<Launch> MoeRouteLaunch(const ir::Op& op, const Target& target, int64_t E, int64_t k, bool sigmoid,
                                      bool norm, int64_t tokens) {
  MEMRA_ASSIGN_OR_RETURN(Defines d, RouteDefines(op, E, k, sigmoid, norm));
  Launch l;
  l.kernel.module.file = kFile;
  l.kernel.module.defines = std::move(d);
  l.kernel.entry = sigmoid ? "moe_route_sigmoid" : "moe_route";
  l.block = 256;
  l.grid = static_cast<uint32_t>(std::clamp<int64_t>((tokens + 7) / 8, 1, int64_t{target.sm_count} * 8));
  return l;
}

std::unique_ptr<GpuOpImpl> CreateMoeRoute() { return std::make_unique<MoeRouteImpl>(); }
std::unique_ptr<GpuOpImpl> CreateGatedAdd() { return std::make_unique<GatedAddImpl>(); }
std::unique_ptr<GpuOpImpl> CreateMoeFfnDecode() {
  return std::make_unique<MoeDecodeImpl>("moe_ffn_gemv_q", ir::OpKind::kMoeFfn);
}
std::unique_ptr<GpuOpImpl> CreateMoeFfnUngatedDecode() {
  return std::make_unique<MoeDecodeImpl>("moe_ffn_ungated_gemv_q", ir::OpKind::kMoeFfnUngated);
}
std::unique_ptr<GpuOpImpl> CreateMoeExpertsDecode() {
  return std::make_unique<MoeDecodeImpl>("moe_experts_gemv_q", ir::OpKind::kMoeExperts);
}
std::unique_ptr<GpuOpImpl> CreateMoeFfnGrouped() {
  return std::make_unique<MoeGroupedImpl>("moe_ffn_grouped", ir::OpKind::kMoeFfn);
}
std::unique_ptr<GpuOpImpl> CreateMoeFfnUngatedGrouped() {
  return std::make_unique<MoeGroupedImpl>("moe_ffn_ungated_grouped", ir::OpKind::kMoeFfnUngated);
}
std::unique_ptr<GpuOpImpl> CreateMoeExpertsGrouped() {
  return std::make_unique<MoeGroupedImpl>("moe_experts_grouped", ir::OpKind::kMoeExperts);
}

}  // namespace memra::kernels::cuda
