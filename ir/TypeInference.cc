#include "ir/TypeInference.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/RowProgram.h"
#include "ir/StatusMacros.h"

namespace memra::ir {
namespace {

using Types = llvm::SmallVector<TensorType, 2>;

std::string Desc(const Value* v) {
  return absl::StrCat(v->is_global() ? "@" : "%", v->name().empty() ? "?" : v->name(), " : ", v->type().ToString());
}

absl::Status Err(absl::string_view msg) { return absl::InvalidArgumentError(msg); }

// Expected state kind of the state operand named `operand`, by op kind.
std::optional<StateKind> ExpectedStateKind(OpKind kind, absl::string_view operand) {
  switch (kind) {
    case OpKind::kPagedKvAppend:
    case OpKind::kPagedAttention:
      return operand == "blocks" ? StateKind::kBlocks : StateKind::kKv;
    case OpKind::kSeqConv1dCausal:
      return StateKind::kConv;
    case OpKind::kSeqGatedDeltaScan:
      return StateKind::kDelta;
    case OpKind::kSeqPositions:
    case OpKind::kSeqAdvancePositions:
      return StateKind::kPosition;
    case OpKind::kKvAppend:
    case OpKind::kAttention:
    case OpKind::kAttentionGated:
    case OpKind::kGatedAttentionStep:
    case OpKind::kQkNormRopeAppend:
      return StateKind::kKv;
    case OpKind::kConv1dCausal:
      return StateKind::kConv;
    case OpKind::kGatedDeltaScan:
      return StateKind::kDelta;
    case OpKind::kDeltaNetStep:
    case OpKind::kMatMulDeltaNetStep:
      return operand == "conv_state" ? StateKind::kConv : StateKind::kDelta;
    case OpKind::kPositions:
    case OpKind::kAdvancePositions:
      return StateKind::kPosition;
    default:
      return std::nullopt;
  }
}

// Context for one inference: operand access by name with uniform error messages.
class Ctx {
 public:
  Ctx(OpKind kind, llvm::ArrayRef<Value*> operands, const AttrDict& attrs)
      : info_(InfoOf(kind)), operands_(operands), attrs_(attrs) {}

  const Value* operator[](size_t i) const { return operands_[i]; }
  const Shape& S(size_t i) const { return operands_[i]->shape(); }
  DType D(size_t i) const { return operands_[i]->dtype(); }
  std::string N(size_t i) const {
    const OperandSpec* spec = info_.operand_spec(i);
    std::string name = spec ? spec->name : "?";
    if (spec && spec->variadic) absl::StrAppend(&name, "#", i - (info_.operands.size() - 1));
    return absl::StrCat("operand '", name, "' (", Desc(operands_[i]), ")");
  }
  size_t size() const { return operands_.size(); }
  int64_t I(absl::string_view a) const { return attrs_.I64Or(a, 0); }
  int64_t IOr(absl::string_view a, int64_t dflt) const { return attrs_.I64Or(a, dflt); }
  double F(absl::string_view a) const { return attrs_.F64Or(a, 0); }

  absl::Status Float(size_t i) const {
    if (!IsFloat(D(i)) || D(i) == DType::kF64)
      return Err(absl::StrCat(N(i), " must be an f32, f16 or bf16 activation"));
    return absl::OkStatus();
  }
  absl::Status DTypeIs(size_t i, DType d) const {
    if (D(i) != d) return Err(absl::StrCat(N(i), " must have dtype ", DTypeName(d)));
    return absl::OkStatus();
  }
  absl::Status RankAtLeast(size_t i, int64_t r) const {
    if (S(i).rank() < r) return Err(absl::StrCat(N(i), " must have rank >= ", r));
    return absl::OkStatus();
  }
  absl::Status Rank(size_t i, int64_t r) const {
    if (S(i).rank() != r) return Err(absl::StrCat(N(i), " must have rank ", r));
    return absl::OkStatus();
  }
  absl::Status SameType(size_t i, size_t j) const {
    if (operands_[i]->type() != operands_[j]->type())
      return Err(absl::StrCat(N(i), " and ", N(j), " must have the same type"));
    return absl::OkStatus();
  }
  absl::Status SameDType(size_t i, size_t j) const {
    if (D(i) != D(j)) return Err(absl::StrCat(N(i), " and ", N(j), " must have the same dtype"));
    return absl::OkStatus();
  }
  absl::Status DimEq(size_t i, int64_t di, const Dim& want, absl::string_view what) const {
    int64_t r = S(i).rank();
    int64_t k = di < 0 ? r + di : di;
    if (k < 0 || k >= r) return Err(absl::StrCat(N(i), " has no dim ", di));
    if (S(i)[k] != want) return Err(absl::StrCat(N(i), " dim ", k, " must be ", want.ToString(), " (", what, ")"));
    return absl::OkStatus();
  }
  absl::Status ShapeIs(size_t i, const Shape& want, absl::string_view what) const {
    if (S(i) != want) return Err(absl::StrCat(N(i), " must have shape ", want.ToString(), " (", what, ")"));
    return absl::OkStatus();
  }
  absl::Status PositiveAttr(absl::string_view a) const {
    if (I(a) <= 0) return Err(absl::StrCat("attribute '", a, "' must be > 0"));
    return absl::OkStatus();
  }

 private:
  const OpInfo& info_;
  llvm::ArrayRef<Value*> operands_;
  const AttrDict& attrs_;
};

#define CHECK_OK(expr) MEMRA_RETURN_IF_ERROR(expr)

TensorType Like(const Value* v) { return v->type(); }

// A step's batch description (ir/Ops.def, "sequences"): seq_slot i32[S] at operand `slot_i`,
// seq_start i32[S+1] at `start_i`, S the slots (a static dim of the per-slot state or counter).
absl::Status CheckBatchOperands(const Ctx& c, size_t slot_i, size_t start_i, const Dim& S) {
  if (!S.IsConstant()) return Err("the slot count must be static");
  CHECK_OK(c.DTypeIs(slot_i, DType::kI32));
  CHECK_OK(c.ShapeIs(slot_i, Shape{S}, "one slot per entry, S entries"));
  CHECK_OK(c.DTypeIs(start_i, DType::kI32));
  CHECK_OK(c.ShapeIs(start_i, Shape{Dim(S.value() + 1)}, "S + 1 row offsets"));
  return absl::OkStatus();
}
TensorType WithLast(const Value* v, Dim d, DType dt) {
  Shape s = v->shape();
  s[s.rank() - 1] = std::move(d);
  return TensorType(dt, s);
}
TensorType DropLast(const Value* v, DType dt) { return TensorType(dt, v->shape().Prefix(v->rank() - 1)); }

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return Err(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  return a;
}

// The rope attributes against head dim `d`: n_rot even, > 0 and <= d; base > 0; mode neox.
absl::Status CheckRopeAttrs(const Ctx& c, const AttrDict& attrs, const Dim& d) {
  int64_t n_rot = c.I("n_rot");
  if (n_rot <= 0 || n_rot % 2 != 0) return Err("attribute 'n_rot' must be even and > 0");
  if (d.IsConstant() && n_rot > d.value())
    return Err(absl::StrCat("attribute 'n_rot' (", n_rot, ") exceeds the head dim ", d.value()));
  if (c.F("base") <= 0) return Err("attribute 'base' must be > 0");
  if (auto mode = attrs.GetString("mode"); mode && *mode != "neox")
    return Err(absl::StrCat("rope mode '", *mode, "' is not supported (only \"neox\")"));
  return absl::OkStatus();
}

// Rope's optional freq_factors (operand i): f32 [>= n_rot / 2].
absl::Status CheckFreqFactors(const Ctx& c, size_t i) {
  CHECK_OK(c.DTypeIs(i, DType::kF32));
  CHECK_OK(c.Rank(i, 1));
  const Dim& n = c.S(i)[0];
  if (n.IsConstant() && n.value() < c.I("n_rot") / 2)
    return Err(absl::StrCat(c.N(i), ": ", n.value(), " factors, fewer than n_rot / 2 = ", c.I("n_rot") / 2));
  return absl::OkStatus();
}

// A sliding-window ring (kv_append / attention 'ring'): W > 0 rows of window in a cache of `rows`
// >= W; on attention it is the window itself.
absl::Status CheckRing(const Ctx& c, const AttrDict& attrs, const Dim& rows, bool attention) {
  if (!attrs.Has("ring")) return absl::OkStatus();
  const int64_t ring = c.I("ring");
  if (ring <= 0) return Err("attribute 'ring' must be > 0 (the window the ring holds)");
  if (attention && c.I("window") != ring)
    return Err(absl::StrCat("attribute 'ring' (", ring, ") must equal the attention's 'window' (", c.I("window"), ")"));
  if (rows.IsConstant() && rows.value() < ring)
    return Err(absl::StrCat("a ring for a window of ", ring, " keys needs at least ", ring, " cache rows, not ",
                            rows.value()));
  return absl::OkStatus();
}

// The quantized-row rule of a matrix operand: its last dim (K) whole blocks of its dtype.
absl::Status CheckBlockRows(const Ctx& c, size_t i) {
  const Dim& k = c.S(i).back();
  int64_t block = InfoOf(c.D(i)).block_elems;
  if (block > 1 && k.IsConstant() && k.value() % block != 0)
    return Err(absl::StrCat(c.N(i), ": K = ", k.value(), " is not a multiple of the ", DTypeName(c.D(i)),
                            " block size ", block));
  return absl::OkStatus();
}

// The one-token product of the decode fusions (moe_router, matmul_add_rms_norm): x float[1, K],
// w [N, K].
absl::Status CheckOneTokenProduct(const Ctx& c) {
  CHECK_OK(c.Float(0));
  CHECK_OK(c.Rank(0, 2));
  CHECK_OK(c.Rank(1, 2));
  CHECK_OK(c.DimEq(1, 1, c.S(0).back(), "K, the last dim of 'x'"));
  if (c.S(0)[0].IsConstant() && c.S(0)[0].value() != 1)
    return Err(absl::StrCat("'x' must be one token ([1, K]), not ", c.S(0)[0].value()));
  return absl::OkStatus();
}

// A delta-net step's head geometry: `channels` (what names it) = 2 Hk Dk + Hv Dv with Hv a
// multiple of Hk, where the dims are known; and its attributes eps, qk_l2_eps >= 0.
absl::Status CheckDeltaNetHeads(const Ctx& c, const Dim& ch, const Dim& hv, const Dim& dv, const Dim& dk,
                                absl::string_view channels) {
  if (ch.IsConstant() && hv.IsConstant() && dv.IsConstant() && dk.IsConstant()) {
    const int64_t qk = ch.value() - hv.value() * dv.value();  // 2 Hk Dk
    if (dk.value() < 1 || qk <= 0 || qk % (2 * dk.value()) != 0 || hv.value() % (qk / (2 * dk.value())) != 0)
      return Err(absl::StrCat(channels, " (", ch.value(), ") must be 2 Hk Dk + Hv Dv with Hv (", hv.value(),
                              ") a multiple of Hk (Dk = ", dk.value(), ", Dv = ", dv.value(), ")"));
  }
  if (!(c.F("eps") >= 0) || !(c.F("qk_l2_eps") >= 0)) return Err("attributes 'eps' and 'qk_l2_eps' must be >= 0");
  return absl::OkStatus();
}

// The clamped SwiGLU's limit (swiglu, matmul_swiglu, moe_experts): positive and finite, and only
// with the silu gate (llama.cpp clamps SwiGLU only).
absl::Status CheckGluClamp(const AttrDict& attrs) {
  std::optional<double> clamp = attrs.GetF64("clamp");
  if (!clamp) return absl::OkStatus();
  if (!(*clamp > 0) || !std::isfinite(*clamp))
    return Err(absl::StrCat("attribute 'clamp' (", *clamp, ") must be positive and finite"));
  if (attrs.GetString("activation").value_or("silu") != "silu")
    return Err("attribute 'clamp' applies to the silu gate only");
  return absl::OkStatus();
}

// moe_experts' operands from `first` on: x [T, K] at 0, weights and ids [T, k] at 1 and 2, then
// w_down [E, K, F] at `first` and w_gate_up (one [E, 2F, K] or two [E, F, K]) after it.
absl::Status CheckMoeExperts(const Ctx& c, size_t first) {
  CHECK_OK(c.Float(0));
  CHECK_OK(c.Rank(0, 2));
  CHECK_OK(c.Rank(1, 2));
  CHECK_OK(c.SameDType(0, 1));
  CHECK_OK(c.DimEq(1, 0, c.S(0)[0], "tokens of 'x'"));
  CHECK_OK(c.DTypeIs(2, DType::kI32));
  CHECK_OK(c.ShapeIs(2, c.S(1), "the shape of 'weights'"));
  const size_t down = first, gu = first + 1, n_gu = c.size() - gu;
  if (n_gu != 1 && n_gu != 2)
    return Err(absl::StrCat("expects one fused w_gate_up [E, 2F, K] or w_gate and w_up [E, F, K], got ", n_gu,
                            " expert matrices after w_down"));
  for (size_t i = down; i < c.size(); ++i) {
    CHECK_OK(c.Rank(i, 3));
    CHECK_OK(CheckBlockRows(c, i));
  }
  const Dim& E = c.S(down)[0];
  const Dim& F = c.S(down)[2];
  CHECK_OK(c.DimEq(down, 1, c.S(0)[1], "K, the last dim of 'x'"));
  if (!F.IsConstant() || !E.IsConstant()) return Err(absl::StrCat(c.N(down), " must have a constant shape"));
  for (size_t i = gu; i < c.size(); ++i) {
    CHECK_OK(c.DimEq(i, 0, E, "E, the experts of 'w_down'"));
    CHECK_OK(c.DimEq(i, 1, Dim(n_gu == 1 ? 2 * F.value() : F.value()),
                     n_gu == 1 ? "2F, gate and up rows of each expert (F = the last dim of 'w_down')"
                               : "F, the last dim of 'w_down'"));
    CHECK_OK(c.DimEq(i, 2, c.S(0)[1], "K, the last dim of 'x'"));
  }
  // Expert parallelism: the stacks hold one of expert_parts parts of the router's experts.
  const int64_t parts = c.IOr("expert_parts", 1);
  if (parts < 1) return Err(absl::StrCat("attribute 'expert_parts' (", parts, ") must be positive"));
  const int64_t routed = E.value() * parts;
  const Dim& k = c.S(1)[1];
  if (!k.IsConstant() || k.value() <= 0 || k.value() > routed)
    return Err(absl::StrCat(c.N(1), ": k (", k.ToString(), ") must be constant, > 0 and <= the expert count ", routed));
  return absl::OkStatus();
}

// fused_rows: the program parses over these operands; its rows (every activation operand) share
// one f32 type [..., N]; each weight is what its instructions read ([N], mul_weight's also [1]);
// one result of the row type per yield.
absl::StatusOr<Types> InferFusedRows(const Ctx& c, const AttrDict& attrs) {
  std::optional<std::string> text = attrs.GetString("program");
  if (!text) return Err("missing attribute 'program' (str)");
  MEMRA_ASSIGN_OR_RETURN(RowProgram prog, RowProgram::Parse(*text, static_cast<int>(c.size())));
  int row = -1;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i]->kind() == Value::Kind::kWeight) continue;
    if (row < 0) {
      row = static_cast<int>(i);
      CHECK_OK(c.DTypeIs(i, DType::kF32));
      CHECK_OK(c.RankAtLeast(i, 1));
    } else {
      CHECK_OK(c.SameType(i, row));
    }
  }
  if (row < 0) return Err("fused_rows needs at least one activation operand (its rows)");
  const Dim& n = c.S(row).back();
  auto is_weight = [&](const RowRef& r) {
    return r.kind == RowRef::kInput && c[r.index]->kind() == Value::Kind::kWeight;
  };
  for (size_t k = 0; k < prog.instrs.size(); ++k) {
    const RowInstr& in = prog.instrs[k];
    const std::string where = absl::StrCat("instruction t", k, " (", RowOpcodeName(in.opcode), ")");
    if (is_weight(in.a)) return Err(absl::StrCat(where, ": its first argument must be a row, not a weight"));
    const bool weighted = in.opcode == RowOpcode::kRmsNorm || in.opcode == RowOpcode::kMulWeight;
    if (in.opcode == RowOpcode::kAdd || in.opcode == RowOpcode::kMul) {
      if (is_weight(in.b)) return Err(absl::StrCat(where, ": its second argument must be a row, not a weight"));
    } else if (weighted && in.b.kind == RowRef::kInput) {
      if (!is_weight(in.b)) return Err(absl::StrCat(where, ": its weight must be a weight operand"));
      const Shape& w = c.S(in.b.index);
      const bool scalar = in.opcode == RowOpcode::kMulWeight && w == Shape{Dim(1)};
      if (!scalar) CHECK_OK(c.ShapeIs(in.b.index, Shape{n}, absl::StrCat(where, "'s weight, the row width")));
    }
  }
  for (const RowRef& y : prog.yields)
    if (is_weight(y)) return Err("fused_rows yields a weight");
  return Types(prog.yields.size(), Like(c[static_cast<size_t>(row)]));
}

absl::StatusOr<Types> Infer(OpKind kind, const Ctx& c, const AttrDict& attrs, llvm::ArrayRef<TensorType> declared) {
  if (InfoOf(kind).HasFlag(op_flags::kUnary)) {  // y = f(x) elementwise
    CHECK_OK(c.Float(0));
    return Types{Like(c[0])};
  }
  switch (kind) {
    case OpKind::kEmbed: {
      CHECK_OK(c.DTypeIs(0, DType::kI32));
      CHECK_OK(c.Rank(1, 2));
      Shape s = c.S(0);
      s.push_back(c.S(1)[1]);
      return Types{TensorType(DType::kF32, s)};
    }
    case OpKind::kRmsNorm: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      if (c.size() > 1) CHECK_OK(c.ShapeIs(1, Shape{c.S(0).back()}, "the last dim of 'x'"));
      return Types{Like(c[0])};
    }
    case OpKind::kGatedRmsNorm: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.SameType(0, 1));
      CHECK_OK(c.ShapeIs(2, Shape{c.S(0).back()}, "the last dim of 'x'"));
      return Types{Like(c[0])};
    }
    case OpKind::kFusedRows:
      return InferFusedRows(c, attrs);
    case OpKind::kAddRmsNorm: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.SameType(0, 1));
      CHECK_OK(c.ShapeIs(2, Shape{c.S(0).back()}, "the last dim of 'a'"));
      return Types{Like(c[0]), Like(c[0])};
    }
    case OpKind::kMatMulAddRmsNorm: {
      CHECK_OK(CheckOneTokenProduct(c));
      CHECK_OK(CheckBlockRows(c, 1));
      const TensorType product = WithLast(c[0], c.S(1)[0], c.D(0));
      CHECK_OK(c.SameDType(0, 2));
      CHECK_OK(c.ShapeIs(2, product.shape, "the product's shape [1, N]"));
      CHECK_OK(c.ShapeIs(3, Shape{c.S(1)[0]}, "N, the rows of 'w'"));
      return Types{product, product};
    }
    case OpKind::kAddRmsNormMatMul: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.SameType(0, 1));
      CHECK_OK(c.ShapeIs(2, Shape{c.S(0).back()}, "the last dim of 'a'"));
      const std::optional<std::string> glu = attrs.GetString("glu");
      if (glu && *glu != "silu" && *glu != "gelu")
        return Err(absl::StrCat("add_rms_norm_matmul glu '", *glu, "' is not \"silu\" or \"gelu\""));
      if (glu && c.size() != 5) return Err("add_rms_norm_matmul with glu takes exactly two matrices (gate, up)");
      if (!glu && attrs.Has("clamp")) return Err("add_rms_norm_matmul: clamp applies only with glu");
      CHECK_OK(CheckGluClamp(attrs));
      Types out{Like(c[0])};
      for (size_t i = 3; i < c.size(); ++i) {
        CHECK_OK(c.Rank(i, 2));
        CHECK_OK(c.DimEq(i, 1, c.S(0).back(), "K, the last dim of 'a'"));
        CHECK_OK(CheckBlockRows(c, i));
        if (!glu) out.push_back(WithLast(c[0], c.S(i)[0], c.D(0)));
      }
      if (glu) {
        CHECK_OK(c.DimEq(4, 0, c.S(3)[0], "N of the gate matrix"));
        out.push_back(WithLast(c[0], c.S(3)[0], c.D(0)));
      }
      return out;
    }
    case OpKind::kL2Norm:
    case OpKind::kSoftmax:
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      return Types{Like(c[0])};
    case OpKind::kScale:
      CHECK_OK(c.Float(0));
      return Types{Like(c[0])};
    case OpKind::kAdd:
    case OpKind::kMul: {
      CHECK_OK(c.SameDType(0, 1));
      const Shape& a = c.S(0);
      const Shape& b = c.S(1);
      bool ok = b.rank() <= a.rank();
      for (int64_t i = 0; ok && i < b.rank(); ++i) ok = a[a.rank() - b.rank() + i] == b[i];
      if (!ok) return Err(absl::StrCat(c.N(1), " must have the shape of ", c.N(0), " or of a trailing part of it"));
      return Types{Like(c[0])};
    }
    case OpKind::kMulRows:
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.SameDType(0, 1));
      CHECK_OK(c.ShapeIs(1, c.S(0).WithDim(c.S(0).rank() - 1, 1), "one factor per row of 'x'"));
      return Types{Like(c[0])};
    case OpKind::kSwiglu:
      CHECK_OK(c.Float(0));
      CHECK_OK(c.SameType(0, 1));
      CHECK_OK(CheckGluClamp(attrs));
      return Types{Like(c[0])};
    case OpKind::kMatMulSwiglu: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      if (auto act = attrs.GetString("activation"); act && *act != "silu" && *act != "gelu")
        return Err(absl::StrCat("matmul_swiglu activation '", *act, "' is not \"silu\" or \"gelu\""));
      CHECK_OK(CheckGluClamp(attrs));
      for (size_t i : {1, 2}) {
        CHECK_OK(c.Rank(i, 2));
        CHECK_OK(c.DimEq(i, 1, c.S(0).back(), "K, the last dim of 'x'"));
        CHECK_OK(CheckBlockRows(c, i));
      }
      CHECK_OK(c.DimEq(2, 0, c.S(1)[0], "N of 'w_gate'"));
      return Types{WithLast(c[0], c.S(1)[0], c.D(0))};
    }
    case OpKind::kMatMul:
    case OpKind::kMatMulGroup: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      Types out;
      for (size_t i = 1; i < c.size(); ++i) {
        CHECK_OK(c.Rank(i, 2));
        CHECK_OK(c.DimEq(i, 1, c.S(0).back(), "K, the last dim of 'x'"));
        CHECK_OK(CheckBlockRows(c, i));
        out.push_back(WithLast(c[0], c.S(i)[0], c.D(0)));
      }
      return out;
    }
    case OpKind::kQGateSplit: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 2));
      CHECK_OK(c.PositiveAttr("n_head"));
      CHECK_OK(c.PositiveAttr("head_dim"));
      int64_t h = c.I("n_head"), d = c.I("head_dim");
      CHECK_OK(c.DimEq(0, 1, Dim(2 * h * d), "2 * n_head * head_dim"));
      TensorType t(c.D(0), Shape{c.S(0)[0], h, d});
      return Types{t, t};
    }
    case OpKind::kRope: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      CHECK_OK(c.DTypeIs(1, DType::kI32));
      CHECK_OK(c.ShapeIs(1, Shape{c.S(0)[0]}, "one position per token of 'x'"));
      CHECK_OK(CheckRopeAttrs(c, attrs, c.S(0)[2]));
      if (c.size() > 2) CHECK_OK(CheckFreqFactors(c, 2));
      return Types{Like(c[0])};
    }
    case OpKind::kMulWeight: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.DTypeIs(1, DType::kF32));
      CHECK_OK(c.Rank(1, 1));
      const Dim& n = c.S(1)[0];
      if (!(n == Dim(1)) && !(n == c.S(0).dims().back()))
        return Err(absl::StrCat(c.N(1), " must be [1] or the last dim of ", c.N(0)));
      return Types{Like(c[0])};
    }
    case OpKind::kQkNormRope: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      CHECK_OK(c.Rank(1, 3));
      CHECK_OK(c.SameDType(0, 1));
      CHECK_OK(c.DimEq(1, 0, c.S(0)[0], "tokens of 'q'"));
      CHECK_OK(c.DimEq(1, 2, c.S(0)[2], "head dim of 'q'"));
      CHECK_OK(c.ShapeIs(2, Shape{c.S(0)[2]}, "the head dim of 'q'"));
      CHECK_OK(c.ShapeIs(3, Shape{c.S(0)[2]}, "the head dim of 'q'"));
      CHECK_OK(c.DTypeIs(4, DType::kI32));
      CHECK_OK(c.ShapeIs(4, Shape{c.S(0)[0]}, "one position per token of 'q'"));
      CHECK_OK(CheckRopeAttrs(c, attrs, c.S(0)[2]));
      if (c.size() > 5) CHECK_OK(CheckFreqFactors(c, 5));
      return Types{Like(c[0]), Like(c[1])};
    }
    case OpKind::kPositions:
    case OpKind::kAdvancePositions: {
      CHECK_OK(c.DTypeIs(0, DType::kI32));
      CHECK_OK(c.Rank(0, 0));
      CHECK_OK(c.RankAtLeast(1, 1));
      if (kind == OpKind::kAdvancePositions) return Types{};
      return Types{TensorType(DType::kI32, Shape{c.S(1)[0]})};
    }
    case OpKind::kKvAppend: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      CHECK_OK(c.SameType(0, 1));
      for (size_t i : {2, 3}) {
        CHECK_OK(c.Rank(i, 3));
        if (!IsKvCacheDType(c.D(i))) return Err(absl::StrCat(c.N(i), " must be a float or q8_0 KV cache"));
        CHECK_OK(c.DimEq(i, 1, c.S(0)[1], "Hkv of 'k'"));
        CHECK_OK(c.DimEq(i, 2, c.S(0)[2], "head dim of 'k'"));
      }
      CHECK_OK(c.DTypeIs(4, DType::kI32));
      CHECK_OK(c.ShapeIs(4, Shape{c.S(0)[0]}, "one position per token of 'k'"));
      CHECK_OK(CheckRing(c, attrs, c.S(2)[0], false));
      return Types{};
    }
    case OpKind::kAttention:
    case OpKind::kAttentionGated: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      for (size_t i : {1, 2}) {
        CHECK_OK(c.Rank(i, 3));
        if (!IsKvCacheDType(c.D(i))) return Err(absl::StrCat(c.N(i), " must be a float or q8_0 KV cache"));
        CHECK_OK(c.DimEq(i, 2, c.S(0)[2], "head dim of 'q'"));
      }
      if (c.S(1) != c.S(2)) return Err(absl::StrCat(c.N(1), " and ", c.N(2), " must have the same shape"));
      const Dim& hq = c.S(0)[1];
      const Dim& hkv = c.S(1)[1];
      if (hq.IsConstant() && hkv.IsConstant() && (hkv.value() == 0 || hq.value() % hkv.value() != 0))
        return Err(absl::StrCat("query heads (", hq.value(), ") must be a multiple of KV heads (", hkv.value(), ")"));
      CHECK_OK(c.DTypeIs(3, DType::kI32));
      CHECK_OK(c.ShapeIs(3, Shape{c.S(0)[0]}, "one position per token of 'q'"));
      if (kind == OpKind::kAttentionGated) {
        // One gate per element (q's shape) or per head ([T, Hq, 1]).
        CHECK_OK(c.DTypeIs(4, c.D(0)));
        if (c.S(4) != c.S(0)) CHECK_OK(c.ShapeIs(4, Shape{c.S(0)[0], c.S(0)[1], Dim(1)}, "q's shape or one per head"));
      }
      CHECK_OK(CheckRing(c, attrs, c.S(1)[0], true));
      return Types{Like(c[0])};
    }
    case OpKind::kConv1dCausal:
    case OpKind::kSeqConv1dCausal: {
      // seq_: the ring has the slots as dim 0, and the batch description follows it.
      const bool seq = kind == OpKind::kSeqConv1dCausal;
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 2));
      CHECK_OK(c.Rank(1, 2));
      CHECK_OK(c.DimEq(1, 0, c.S(0)[1], "channels of 'x'"));
      const Dim& k = c.S(1)[1];
      if (!k.IsConstant() || k.value() < 1) return Err(absl::StrCat(c.N(1), " must have a constant kernel size >= 1"));
      if (seq) {
        CHECK_OK(c.Rank(2, 3));
        CHECK_OK(c.ShapeIs(2, Shape{c.S(2)[0], c.S(0)[1], k.value() - 1}, "[S, channels, kernel - 1]"));
        CHECK_OK(CheckBatchOperands(c, 3, 4, c.S(2)[0]));
      } else {
        CHECK_OK(c.ShapeIs(2, Shape{c.S(0)[1], k.value() - 1}, "[channels, kernel - 1]"));
      }
      if (!IsFloat(c.D(2))) return Err(absl::StrCat(c.N(2), " must be a float state"));
      if (auto act = attrs.GetString("activation"); act && *act != "silu")
        return Err(absl::StrCat("conv activation '", *act, "' is not supported (only \"silu\")"));
      return Types{Like(c[0])};
    }
    case OpKind::kDeltaNetGates: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 2));
      CHECK_OK(c.SameType(0, 1));
      CHECK_OK(c.ShapeIs(2, Shape{c.S(0)[1]}, "one per value head"));
      CHECK_OK(c.ShapeIs(3, Shape{c.S(0)[1]}, "one per value head"));
      return Types{Like(c[0]), Like(c[0])};
    }
    case OpKind::kGatedDeltaScan:
    case OpKind::kSeqGatedDeltaScan: {
      // seq_: the state has the slots as dim 0, and the batch description follows it.
      const bool seq = kind == OpKind::kSeqGatedDeltaScan;
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      CHECK_OK(c.SameType(0, 1));
      CHECK_OK(c.Rank(2, 3));
      CHECK_OK(c.SameDType(0, 2));
      CHECK_OK(c.DimEq(2, 0, c.S(0)[0], "tokens of 'q'"));
      Shape th{c.S(0)[0], c.S(2)[1]};
      CHECK_OK(c.ShapeIs(3, th, "[T, Hv]"));
      CHECK_OK(c.ShapeIs(4, th, "[T, Hv]"));
      const Dim& hk = c.S(0)[1];
      const Dim& hv = c.S(2)[1];
      if (hk.IsConstant() && hv.IsConstant() && (hk.value() == 0 || hv.value() % hk.value() != 0))
        return Err(absl::StrCat("value heads (", hv.value(), ") must be a multiple of key heads (", hk.value(), ")"));
      if (seq) {
        CHECK_OK(c.Rank(5, 4));
        CHECK_OK(c.ShapeIs(5, Shape{c.S(5)[0], hv, c.S(2)[2], c.S(0)[2]}, "[S, Hv, Dv, Dk]"));
        CHECK_OK(CheckBatchOperands(c, 6, 7, c.S(5)[0]));
      } else {
        CHECK_OK(c.ShapeIs(5, Shape{hv, c.S(2)[2], c.S(0)[2]}, "[Hv, Dv, Dk]"));
      }
      if (!IsFloat(c.D(5))) return Err(absl::StrCat(c.N(5), " must be a float state"));
      if (auto eps = attrs.GetF64("qk_l2_eps"); eps && !(*eps >= 0)) return Err("attribute 'qk_l2_eps' must be >= 0");
      return Types{Like(c[2])};
    }
    case OpKind::kQkNormRopeAppend: {
      // kv_append's operands and rules, then qk_norm_rope's (q_out is q's type).
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      CHECK_OK(c.SameType(0, 1));
      const Dim& t = c.S(0)[0];
      const Dim& d = c.S(0)[2];
      for (size_t i : {2, 3}) {
        CHECK_OK(c.Rank(i, 3));
        if (!IsKvCacheDType(c.D(i))) return Err(absl::StrCat(c.N(i), " must be a float or q8_0 KV cache"));
        CHECK_OK(c.DimEq(i, 1, c.S(0)[1], "Hkv of 'k'"));
        CHECK_OK(c.DimEq(i, 2, d, "head dim of 'k'"));
      }
      CHECK_OK(c.DTypeIs(4, DType::kI32));
      CHECK_OK(c.ShapeIs(4, Shape{t}, "one position per token of 'k'"));
      CHECK_OK(c.SameDType(0, 5));
      CHECK_OK(c.Rank(5, 3));
      CHECK_OK(c.DimEq(5, 0, t, "tokens of 'k'"));
      CHECK_OK(c.DimEq(5, 2, d, "head dim of 'k'"));
      CHECK_OK(c.ShapeIs(6, Shape{d}, "the head dim of 'k'"));
      CHECK_OK(c.ShapeIs(7, Shape{d}, "the head dim of 'k'"));
      CHECK_OK(CheckRopeAttrs(c, attrs, d));
      if (d.IsConstant() && !InQkNormRopeAppendDomain(d.value(), c.I("n_rot")))
        return Err("qk_norm_rope_append takes a head dim of a multiple of 32 up to 512 and n_rot a multiple of 64");
      if (!(c.F("eps") >= 0)) return Err("attribute 'eps' must be >= 0");
      if (auto v = attrs.GetF64("v_norm_eps"); v && !(*v >= 0)) return Err("attribute 'v_norm_eps' must be >= 0");
      CHECK_OK(CheckRing(c, attrs, c.S(2)[0], false));
      if (c.size() > 8) CHECK_OK(CheckFreqFactors(c, 8));
      return Types{Like(c[5])};
    }
    case OpKind::kGatedAttentionStep: {
      // kv_append's operands and rules, then q_gate_split's and qk_norm_rope's, then attention's.
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      CHECK_OK(c.SameType(0, 1));
      const Dim& t = c.S(0)[0];
      const Dim& hkv = c.S(0)[1];
      const Dim& d = c.S(0)[2];
      for (size_t i : {2, 3}) {
        CHECK_OK(c.Rank(i, 3));
        if (!IsKvCacheDType(c.D(i))) return Err(absl::StrCat(c.N(i), " must be a float or q8_0 KV cache"));
        CHECK_OK(c.DimEq(i, 1, hkv, "Hkv of 'k'"));
        CHECK_OK(c.DimEq(i, 2, d, "head dim of 'k'"));
      }
      if (c.S(2) != c.S(3)) return Err(absl::StrCat(c.N(2), " and ", c.N(3), " must have the same shape"));
      CHECK_OK(c.DTypeIs(4, DType::kI32));
      CHECK_OK(c.ShapeIs(4, Shape{t}, "one position per token of 'k'"));
      CHECK_OK(c.SameDType(0, 5));
      CHECK_OK(c.Rank(5, 2));
      CHECK_OK(c.DimEq(5, 0, t, "tokens of 'k'"));
      CHECK_OK(c.PositiveAttr("n_head"));
      CHECK_OK(c.PositiveAttr("head_dim"));
      const int64_t h = c.I("n_head"), hd = c.I("head_dim");
      CHECK_OK(c.DimEq(0, 2, Dim(hd), "head_dim"));
      CHECK_OK(c.DimEq(5, 1, Dim(2 * h * hd), "2 * n_head * head_dim"));
      if (hkv.IsConstant() && (hkv.value() == 0 || h % hkv.value() != 0))
        return Err(absl::StrCat("query heads (", h, ") must be a multiple of KV heads (", hkv.value(), ")"));
      CHECK_OK(c.ShapeIs(6, Shape{d}, "the head dim of 'k'"));
      CHECK_OK(c.ShapeIs(7, Shape{d}, "the head dim of 'k'"));
      CHECK_OK(CheckRopeAttrs(c, attrs, d));
      if (!(c.F("eps") >= 0)) return Err("attribute 'eps' must be >= 0");
      CHECK_OK(CheckRing(c, attrs, c.S(2)[0], true));
      return Types{TensorType(c.D(0), Shape{t, h, hd})};
    }
    case OpKind::kDeltaNetStep: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 2));
      CHECK_OK(c.Rank(6, 3));
      CHECK_OK(c.SameDType(0, 6));
      CHECK_OK(c.Rank(9, 3));
      const Dim& t = c.S(0)[0];
      const Dim& hv = c.S(6)[1];
      const Dim& dv = c.S(6)[2];
      CHECK_OK(c.DimEq(6, 0, t, "tokens of 'x'"));
      CHECK_OK(c.ShapeIs(9, Shape{hv, dv, c.S(9)[2]}, "[Hv, Dv, Dk] (Hv, Dv from 'z')"));
      CHECK_OK(c.Rank(1, 2));
      CHECK_OK(c.DimEq(1, 0, c.S(0)[1], "channels of 'x'"));
      const Dim& k = c.S(1)[1];
      if (!k.IsConstant() || k.value() < 1) return Err(absl::StrCat(c.N(1), " must have a constant kernel size >= 1"));
      CHECK_OK(c.ShapeIs(8, Shape{c.S(0)[1], k.value() - 1}, "[channels, kernel - 1]"));
      for (size_t i : {2u, 3u}) {
        CHECK_OK(c.SameDType(0, i));
        CHECK_OK(c.ShapeIs(i, Shape{t, hv}, "[T, Hv]"));
      }
      CHECK_OK(c.ShapeIs(4, Shape{hv}, "one per value head"));
      CHECK_OK(c.ShapeIs(5, Shape{hv}, "one per value head"));
      CHECK_OK(c.ShapeIs(7, Shape{dv}, "[Dv]"));
      for (size_t i : {8u, 9u})
        if (!IsFloat(c.D(i))) return Err(absl::StrCat(c.N(i), " must be a float state"));
      CHECK_OK(CheckDeltaNetHeads(c, c.S(0)[1], hv, dv, c.S(9)[2], "channels of 'x'"));
      return Types{Like(c[6])};
    }
    case OpKind::kMatMulDeltaNetStep: {
      CHECK_OK(CheckOneTokenProduct(c));
      for (size_t i = 1; i <= 4; ++i) {
        if (i > 1) {
          CHECK_OK(c.Rank(i, 2));
          CHECK_OK(c.DimEq(i, 1, c.S(0).back(), "K, the last dim of 'x'"));
        }
        if (!IsFloatWeight(c.D(i)))
          return Err(absl::StrCat(c.N(i), " must be f32, f16 or bf16, not ", DTypeName(c.D(i))));
        if (c.D(i) != c.D(1)) return Err(absl::StrCat(c.N(i), " must have the dtype of ", c.N(1)));
      }
      CHECK_OK(c.Rank(6, 1));
      CHECK_OK(c.Rank(8, 1));
      CHECK_OK(c.Rank(10, 3));
      const Dim& hv = c.S(6)[0];
      const Dim& dv = c.S(8)[0];
      const Dim& ch = c.S(1)[0];
      CHECK_OK(c.ShapeIs(7, Shape{hv}, "one per value head (Hv from 'dt_bias')"));
      CHECK_OK(c.DimEq(3, 0, hv, "Hv rows (one per value head)"));
      CHECK_OK(c.DimEq(4, 0, hv, "Hv rows (one per value head)"));
      if (hv.IsConstant() && dv.IsConstant()) CHECK_OK(c.DimEq(2, 0, Dim(hv.value() * dv.value()), "Hv Dv rows"));
      CHECK_OK(c.ShapeIs(10, Shape{hv, dv, c.S(10)[2]}, "[Hv, Dv, Dk] (Hv from 'dt_bias', Dv from 'norm_w')"));
      CHECK_OK(c.Rank(5, 2));
      CHECK_OK(c.DimEq(5, 0, ch, "channels, the rows of 'w_qkv'"));
      const Dim& k = c.S(5)[1];
      if (!k.IsConstant() || k.value() < 1) return Err(absl::StrCat(c.N(5), " must have a constant kernel size >= 1"));
      CHECK_OK(c.ShapeIs(9, Shape{ch, k.value() - 1}, "[channels, kernel - 1]"));
      for (size_t i : {9u, 10u})
        if (!IsFloat(c.D(i))) return Err(absl::StrCat(c.N(i), " must be a float state"));
      CHECK_OK(CheckDeltaNetHeads(c, ch, hv, dv, c.S(10)[2], "rows of 'w_qkv'"));
      return Types{TensorType(c.D(0), Shape{c.S(0)[0], hv, dv})};
    }
    case OpKind::kMoeRoute:
    case OpKind::kMoeRouteSigmoid: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 2));
      CHECK_OK(c.PositiveAttr("k"));
      const int64_t k = c.I("k");
      const Dim& e = c.S(0)[1];
      if (e.IsConstant() && k > e.value())
        return Err(absl::StrCat("attribute 'k' (", k, ") exceeds the expert count ", e.value(), " of ", c.N(0)));
      if (c.size() > 1) {
        CHECK_OK(c.DTypeIs(1, DType::kF32));
        CHECK_OK(c.ShapeIs(1, Shape{e},
                           kind == OpKind::kMoeRoute ? "one scale per expert (the last dim of 'logits')"
                                                     : "one bias per expert (the last dim of 'logits')"));
      }
      return Types{WithLast(c[0], k, c.D(0)), WithLast(c[0], k, DType::kI32)};
    }
    case OpKind::kMoeRouter: {
      CHECK_OK(CheckOneTokenProduct(c));
      if (!IsFloatWeight(c.D(1)))
        return Err(absl::StrCat("the router weight must be f32, f16 or bf16, not ", DTypeName(c.D(1))));
      CHECK_OK(c.PositiveAttr("k"));
      const int64_t k = c.I("k");
      const Dim& e = c.S(1)[0];
      if (e.IsConstant() && k > e.value())
        return Err(absl::StrCat("attribute 'k' (", k, ") exceeds the expert count ", e.value(), " of ", c.N(1)));
      const std::string gate = attrs.GetString("gate").value_or("softmax");
      if (gate != "softmax" && gate != "sigmoid")
        return Err(absl::StrCat("gate '", gate, "' is not supported (\"softmax\" or \"sigmoid\")"));
      if (gate == "softmax" && (attrs.Has("norm") || attrs.Has("scale")))
        return Err("attributes 'norm' and 'scale' belong to the sigmoid gate");
      if (c.size() > 2) {
        CHECK_OK(c.DTypeIs(2, DType::kF32));
        CHECK_OK(c.ShapeIs(2, Shape{e}, "one value per expert (the rows of 'w')"));
      }
      return Types{TensorType(c.D(0), Shape{c.S(0)[0], Dim(k)}), TensorType(DType::kI32, Shape{c.S(0)[0], Dim(k)})};
    }
    case OpKind::kMoeExperts:
      CHECK_OK(CheckMoeExperts(c, 3));
      if (auto act = attrs.GetString("activation"); act && *act != "silu" && *act != "gelu")
        return Err(absl::StrCat("activation '", *act, "' is not supported (\"silu\" or \"gelu\")"));
      CHECK_OK(CheckGluClamp(attrs));
      return Types{Like(c[0])};
    case OpKind::kGatedAdd: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.SameType(0, 1));
      CHECK_OK(c.SameDType(0, 2));
      CHECK_OK(c.ShapeIs(2, c.S(0).WithDim(c.S(0).rank() - 1, 1), "one gate per row of 'a'"));
      return Types{Like(c[0])};
    }
    case OpKind::kMoeFfn: {
      CHECK_OK(CheckMoeExperts(c, 7));
      const Dim& K = c.S(0)[1];
      for (size_t i = 3; i < 7; ++i) {
        CHECK_OK(c.Rank(i, 2));
        CHECK_OK(CheckBlockRows(c, i));
      }
      CHECK_OK(c.ShapeIs(3, Shape{Dim(1), K}, "[1, K]: one shared-expert gate logit per token"));
      CHECK_OK(c.DimEq(4, 1, K, "K, the last dim of 'x'"));
      CHECK_OK(c.ShapeIs(5, c.S(4), "the shape of 'sh_gate'"));
      CHECK_OK(c.ShapeIs(6, Shape{K, c.S(4)[0]}, "[K, Fs]"));
      return Types{Like(c[0])};
    }
    case OpKind::kMoeFfnUngated: {
      CHECK_OK(CheckMoeExperts(c, 6));
      CHECK_OK(CheckGluClamp(attrs));
      const Dim& K = c.S(0)[1];
      for (size_t i = 3; i < 6; ++i) {
        CHECK_OK(c.Rank(i, 2));
        CHECK_OK(CheckBlockRows(c, i));
      }
      CHECK_OK(c.DimEq(3, 1, K, "K, the last dim of 'x'"));
      CHECK_OK(c.ShapeIs(4, c.S(3), "the shape of 'sh_gate'"));
      CHECK_OK(c.ShapeIs(5, Shape{K, c.S(3)[0]}, "[K, Fs]"));
      return Types{Like(c[0])};
    }
    case OpKind::kSeqPositions:
    case OpKind::kSeqAdvancePositions: {
      // counter i32[S]; (positions:) tok_seq i32[T]; seq_slot i32[S]; seq_start i32[S+1].
      const bool adv = kind == OpKind::kSeqAdvancePositions;
      const size_t slot_i = adv ? 1 : 2, start_i = adv ? 2 : 3;
      CHECK_OK(c.DTypeIs(0, DType::kI32));
      CHECK_OK(c.Rank(0, 1));
      CHECK_OK(CheckBatchOperands(c, slot_i, start_i, c.S(0)[0]));
      if (adv) return Types{};
      CHECK_OK(c.DTypeIs(1, DType::kI32));
      CHECK_OK(c.Rank(1, 1));
      const TensorType per_row(DType::kI32, Shape{c.S(1)[0]});
      return Types{per_row, per_row};
    }
    case OpKind::kPagedKvAppend:
    case OpKind::kPagedAttention: {
      const bool app = kind == OpKind::kPagedKvAppend;
      const size_t kc = app ? 2 : 1, blocks = kc + 2, pos = blocks + 1, slot = pos + 1;
      CHECK_OK(c.Float(0));
      CHECK_OK(c.Rank(0, 3));
      if (app) CHECK_OK(c.SameType(0, 1));
      for (size_t i : {kc, kc + 1}) {
        CHECK_OK(c.Rank(i, 4));
        if (!IsKvCacheDType(c.D(i))) return Err(absl::StrCat(c.N(i), " must be a float or q8_0 KV cache"));
        CHECK_OK(c.DimEq(i, 3, c.S(0)[2], "head dim"));
      }
      if (c.S(kc) != c.S(kc + 1)) return Err(absl::StrCat(c.N(kc), " and ", c.N(kc + 1), " must have the same shape"));
      const Dim& hq = c.S(0)[1];
      const Dim& hkv = c.S(kc)[2];
      if (app) CHECK_OK(c.DimEq(0, 1, hkv, "Hkv of the cache"));
      if (hq.IsConstant() && hkv.IsConstant() && (hkv.value() == 0 || hq.value() % hkv.value() != 0))
        return Err(absl::StrCat("query heads (", hq.value(), ") must be a multiple of KV heads (", hkv.value(), ")"));
      CHECK_OK(c.DTypeIs(blocks, DType::kI32));
      CHECK_OK(c.Rank(blocks, 2));
      for (size_t i : {pos, slot}) {
        CHECK_OK(c.DTypeIs(i, DType::kI32));
        CHECK_OK(c.ShapeIs(i, Shape{c.S(0)[0]}, "one per row"));
      }
      if (app) return Types{};
      return Types{Like(c[0])};
    }
    case OpKind::kTakeSeqLastRows: {
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.DTypeIs(1, DType::kI32));
      CHECK_OK(c.Rank(1, 1));
      const Dim& n = c.S(1)[0];
      if (!n.IsConstant() || n.value() < 2) return Err(absl::StrCat(c.N(1), " must have a static length B + 1 >= 2"));
      return Types{TensorType(c.D(0), c.S(0).WithDim(0, n.value() - 1))};
    }
    case OpKind::kTakeLastRow:
      CHECK_OK(c.RankAtLeast(0, 1));
      return Types{TensorType(c.D(0), c.S(0).WithDim(0, 1))};
    case OpKind::kTopK: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.PositiveAttr("k"));
      int64_t k = c.I("k");
      const Dim& n = c.S(0).back();
      if (n.IsConstant() && k > n.value())
        return Err(absl::StrCat("attribute 'k' (", k, ") exceeds the last dim ", n.value()));
      return Types{WithLast(c[0], k, c.D(0)), WithLast(c[0], k, DType::kI32)};
    }
    case OpKind::kArgmax:
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      return Types{DropLast(c[0], DType::kI32)};
    case OpKind::kSample: {
      const DType want[] = {DType::kF32, DType::kF32, DType::kI32};
      for (size_t i = 0; i < 3; ++i) {
        CHECK_OK(c.DTypeIs(i, want[i]));
        CHECK_OK(c.Rank(i, 2));
        if (i > 0 && c.S(i)[0] != c.S(0)[0]) return Err(absl::StrCat(c.N(i), " must have one row per row of ", c.N(0)));
      }
      const Dim& np = c.S(1)[1];
      if (!np.IsConstant() || np.value() != 8)
        return Err(absl::StrCat(c.N(1),
                                " must have 8 columns (temperature, top_k, top_p, log min_p, u, repeat, "
                                "frequency, presence)"));
      const Dim& pen = c.S(2)[1];
      if (!pen.IsConstant() || pen.value() % 2 != 0)
        return Err(absl::StrCat(c.N(2), " must have a static, even column count (ids, then counts)"));
      return Types{DropLast(c[0], DType::kI32)};
    }
    case OpKind::kConcat: {
      CHECK_OK(c.RankAtLeast(0, 1));
      MEMRA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(c.I("axis"), c.S(0).rank()));
      Shape s = c.S(0);
      for (size_t i = 1; i < c.size(); ++i) {
        CHECK_OK(c.SameDType(0, i));
        CHECK_OK(c.Rank(i, s.rank()));
        for (int64_t d = 0; d < s.rank(); ++d)
          if (d != axis) CHECK_OK(c.DimEq(i, d, s[d], "concat operands agree off the axis"));
        const Dim& a = s[axis];
        const Dim& b = c.S(i)[axis];
        if (a.IsConstant() && b.IsConstant())
          s[axis] = Dim(a.value() + b.value());
        else if (a.IsConstant())
          s[axis] = b.Plus(a.value());
        else if (b.IsConstant())
          s[axis] = a.Plus(b.value());
        else if (a.symbol() == b.symbol())
          s[axis] = Dim::Symbol(a.symbol(), a.coeff() + b.coeff(), a.offset() + b.offset());
        else
          return Err(absl::StrCat("concat of dims ", a.ToString(), " and ", b.ToString(), " is not an affine dim"));
      }
      return Types{TensorType(c.D(0), s)};
    }
    case OpKind::kSplit: {
      CHECK_OK(c.RankAtLeast(0, 1));
      MEMRA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(c.I("axis"), c.S(0).rank()));
      std::vector<int64_t> sizes = attrs.GetI64Array("sizes").value_or(std::vector<int64_t>{});
      if (sizes.empty()) return Err("attribute 'sizes' must not be empty");
      int64_t total = 0;
      Types out;
      for (int64_t s : sizes) {
        if (s <= 0) return Err("attribute 'sizes' must hold sizes > 0");
        total += s;
        out.push_back(TensorType(c.D(0), c.S(0).WithDim(axis, s)));
      }
      CHECK_OK(c.DimEq(0, axis, Dim(total), "the sum of 'sizes'"));
      return out;
    }
    case OpKind::kView: {
      CHECK_OK(c.RankAtLeast(0, 1));
      MEMRA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(c.I("axis"), c.S(0).rank()));
      int64_t off = c.I("offset"), size = c.I("size");
      if (off < 0 || size <= 0) return Err("view needs offset >= 0 and size > 0");
      const Dim& d = c.S(0)[axis];
      if (d.IsConstant() && off + size > d.value())
        return Err(absl::StrCat("view [", off, ", ", off + size, ") exceeds dim ", axis, " of size ", d.value()));
      return Types{TensorType(c.D(0), c.S(0).WithDim(axis, size))};
    }
    case OpKind::kAllReduce:
      CHECK_OK(c.Float(0));
      return Types{Like(c[0])};
    case OpKind::kAllGather: {
      CHECK_OK(c.Float(0));
      CHECK_OK(c.RankAtLeast(0, 1));
      CHECK_OK(c.PositiveAttr("parts"));
      MEMRA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(c.I("axis"), c.S(0).rank()));
      const Dim& d = c.S(0)[axis];
      if (!d.IsConstant()) return Err("all_gather's axis must have a static size");
      return Types{TensorType(c.D(0), c.S(0).WithDim(axis, d.value() * c.I("parts")))};
    }
    case OpKind::kCast: {
      CHECK_OK(c.Float(0));
      std::optional<DType> to = ParseDType(attrs.GetString("dtype").value_or(""));
      if (!to || !IsFloat(*to) || *to == DType::kF64) return Err("attribute 'dtype' must name f32, f16 or bf16");
      return Types{TensorType(*to, c.S(0))};
    }
    case OpKind::kReshape: {
      if (declared.size() != 1) return Err("reshape needs its result type");
      if (declared[0].dtype != c.D(0)) return Err("reshape must keep the dtype");
      if (!Shape::SameNumElements(declared[0].shape, c.S(0)))
        return Err(absl::StrCat("reshape from ", c.S(0).ToString(), " to ", declared[0].shape.ToString(),
                                " changes the element count"));
      return Types{declared[0]};
    }
    case OpKind::kConstant:
      if (declared.size() != 1) return Err("constant needs its result type");
      if (!IsFloat(declared[0].dtype) && !IsInteger(declared[0].dtype))
        return Err("constant must have a float or integer dtype");
      return Types{declared[0]};
    case OpKind::kReturn:
    case OpKind::kSegment:
      return Types{};
  }
  return Err("unknown op kind");
}

}  // namespace

absl::Status CheckSignature(OpKind kind, llvm::ArrayRef<Value*> operands, const AttrDict& attrs) {
  const OpInfo& info = InfoOf(kind);
  int n = static_cast<int>(operands.size());
  if (n < info.min_operands() || (info.max_operands() >= 0 && n > info.max_operands())) {
    std::string want = info.max_operands() < 0 ? absl::StrCat("at least ", info.min_operands())
                       : info.min_operands() == info.max_operands()
                           ? absl::StrCat(info.min_operands())
                           : absl::StrCat(info.min_operands(), " to ", info.max_operands());
    return Err(absl::StrCat("expects ", want, " operands, got ", n));
  }
  for (int i = 0; i < n; ++i) {
    const OperandSpec* spec = info.operand_spec(i);
    const Value* v = operands[i];
    if (!v) return Err(absl::StrCat("operand '", spec->name, "' is null"));
    OperandRole role = v->kind() == Value::Kind::kWeight  ? OperandRole::kWeight
                       : v->kind() == Value::Kind::kState ? OperandRole::kState
                                                          : OperandRole::kAct;
    // A matrix is a weight as a value; the role only says how the op reads it.
    const bool value_ok = spec->role == OperandRole::kValue && role != OperandRole::kState;
    if (!value_ok && role != (spec->role == OperandRole::kMatrix ? OperandRole::kWeight : spec->role))
      return Err(absl::StrCat("operand '", spec->name, "' must be ", spec->role == OperandRole::kAct ? "an " : "a ",
                              OperandRoleName(spec->role), ", got ", OperandRoleName(role), " ", Desc(v)));
    if (role == OperandRole::kState) {
      std::optional<StateKind> want = ExpectedStateKind(kind, spec->name);
      StateKind got = llvm::cast<StateVar>(v)->state_kind();
      if (want && got != *want)
        return Err(absl::StrCat("operand '", spec->name, "' must be state of kind ", StateKindName(*want), ", got ",
                                StateKindName(got), " ", Desc(v)));
    }
  }
  for (const AttrSpec& a : info.attrs) {
    const Attr* got = attrs.Get(a.name);
    if (!got) {
      if (a.optional) continue;
      return Err(absl::StrCat("missing attribute '", a.name, "' (", AttrKindName(a.kind), ")"));
    }
    if (got->kind() != a.kind)
      return Err(absl::StrCat("attribute '", a.name, "' must be ", AttrKindName(a.kind), ", got ",
                              AttrKindName(got->kind()), " ", got->ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<llvm::SmallVector<TensorType, 2>> InferResultTypes(OpKind kind, llvm::ArrayRef<Value*> operands,
                                                                  const AttrDict& attrs,
                                                                  llvm::ArrayRef<TensorType> declared) {
  Ctx c(kind, operands, attrs);
  return Infer(kind, c, attrs, declared);
}

bool IsFloatWeight(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

bool InQkNormRopeAppendDomain(int64_t head_dim, int64_t n_rot) {
  return head_dim > 0 && head_dim % 32 == 0 && head_dim <= 512 && n_rot % 64 == 0;
}

}  // namespace memra::ir
