// fuse-rows: runs of row ops over rows of one type become one fused_rows op (XLA's loop fusion,
// for the ops a decode step has many of and each costs a launch): rms_norm, add_rms_norm, add,
// mul, mul_weight, scale and tanh whose rows share one f32 type [..., N],
//
//   %a = rms_norm(%x, @w1)                  %b, %c = fused_rows(%x, @w1, %r, @w2, @s)
//   %b, %c = add_rms_norm(%a, %r, @w2)   ->   {program = "t0 = rms_norm(a0, a1, 1e-06); t1 = add(t0, a2);
//   %d = mul_weight(%b, @s)                      t2 = rms_norm(t1, a3, 1e-06); t3 = mul_weight(t1, a4);
//                                                yield t3, t2"}
//
// (Gemma 4's sandwich norms: rms_norm -> add -> rms_norm -> add -> scale -> the next rms_norm
// were six launches a layer end.) Related and independent ops both join (two norms of one
// residual, a norm beside it), so one kernel reads each row once and writes only what is used
// outside. The fused op sits where the cluster's last op was; a cluster stays open while no other
// op reads its values (an op that does must run before the fused op, so it closes the cluster),
// which keeps every use after its definition. A lone op stays as it is (its own kernel is as
// good); a cluster that reaches the bounds of ir/RowProgram.h closes and the next op starts one.
#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "ir/RowProgram.h"
#include "ir/StatusMacros.h"
#include "passes/FunctionPass.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;
using ir::RowInstr;
using ir::RowOpcode;
using ir::RowRef;
using ir::Value;

bool IsF32Rows(const Value* v) { return !v->is_global() && v->dtype() == ir::DType::kF32 && v->shape().rank() >= 1; }
bool IsWeightOfWidth(const Value* w, const ir::Dim& n, bool scalar_ok) {
  if (w->kind() != Value::Kind::kWeight || w->shape().rank() != 1) return false;
  return w->shape()[0] == n || (scalar_ok && w->shape()[0] == ir::Dim(1));
}

bool IsNorm(const Op& op) { return op.is(OpKind::kRmsNorm) || op.is(OpKind::kAddRmsNorm); }

// The row type of a fusible op, or nullopt.
std::optional<ir::TensorType> RowTypeOf(const Op& op) {
  if (op.num_operands() == 0 || !IsF32Rows(op.operand(0))) return std::nullopt;
  const ir::TensorType& t = op.operand(0)->type();
  const ir::Dim& n = t.shape.back();
  switch (op.kind()) {
    case OpKind::kRmsNorm:
      if (op.num_operands() > 1 && !IsWeightOfWidth(op.operand(1), n, false)) return std::nullopt;
      return t;
    case OpKind::kScale:
    case OpKind::kTanh:
      return t;
    case OpKind::kMulWeight:
      if (!IsWeightOfWidth(op.operand(1), n, true)) return std::nullopt;
      return t;
    case OpKind::kAdd:
    case OpKind::kMul:
      if (op.operand(1)->is_global() || op.operand(1)->type() != t) return std::nullopt;  // no broadcast
      return t;
    case OpKind::kAddRmsNorm:
      if (op.operand(1)->is_global() || op.operand(1)->type() != t || !IsWeightOfWidth(op.operand(2), n, false))
        return std::nullopt;
      return t;
    default:
      return std::nullopt;
  }
}

struct Cluster {
  ir::TensorType type;
  std::vector<Op*> members;
  absl::flat_hash_set<const Value*> values;  // the members' results
  absl::flat_hash_set<const Value*> inputs;  // distinct operands from outside
  int instrs = 0;
  bool open = true;
};

int InstrCount(const Op& op) { return op.is(OpKind::kAddRmsNorm) ? 2 : 1; }

class FuseRowsPass : public FunctionPass {
 public:
  absl::string_view name() const override { return "fuse-rows"; }
  absl::string_view description() const override {
    return "Fuses runs of row ops (rms_norm, add_rms_norm, add, mul, mul_weight, scale, tanh) over rows of one type "
           "into fused_rows";
  }

 protected:
  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override {
    std::vector<Cluster> clusters;
    absl::flat_hash_map<const Value*, size_t> owner;  // member result -> its cluster
    for (Op& op : *f.body()) {
      std::optional<ir::TensorType> type = RowTypeOf(op);
      if (type && IsNorm(op) && !NormWidthFits(*type)) {
        ++too_wide_;
        type.reset();
      }
      if (!type) {
        // Whatever reads a cluster's value must run before the fused op: the cluster closes.
        for (Value* v : op.operands())
          if (auto it = owner.find(v); it != owner.end()) clusters[it->second].open = false;
        if (op.info().HasFlag(ir::op_flags::kRegion))
          for (Cluster& c : clusters) c.open = false;
        continue;
      }
      Cluster* c = nullptr;
      for (Cluster& k : clusters)
        if (k.open && k.type == *type) c = &k;
      if (c != nullptr && !Fits(*c, op)) {
        c->open = false;
        c = nullptr;
        ++closed_at_bounds_;
      }
      if (c == nullptr) {
        clusters.push_back(Cluster{*type, {}, {}, {}, 0, true});
        c = &clusters.back();
      }
      Add(*c, op);
      for (Value* r : op.results()) owner[r] = static_cast<size_t>(c - clusters.data());
    }
    bool changed = false;
    for (const Cluster& c : clusters) {
      if (c.members.size() < 2) continue;
      MEMRA_ASSIGN_OR_RETURN(bool fused, Fuse(f, c));
      changed |= fused;
    }
    return changed;
  }

 private:
  static void Add(Cluster& c, Op& op) {
    for (Value* v : op.operands())
      if (!c.values.contains(v)) c.inputs.insert(v);
    for (Value* r : op.results()) c.values.insert(r);
    c.members.push_back(&op);
    c.instrs += InstrCount(op);
  }
  // Whether `op` may join without passing ir/RowProgram.h's bounds (counting every member result
  // as a possible yield).
  static bool Fits(const Cluster& c, const Op& op) {
    size_t inputs = c.inputs.size();
    for (Value* v : op.operands())
      if (!c.values.contains(v) && !c.inputs.contains(v)) ++inputs;
    return inputs <= ir::kMaxRowInputs && c.values.size() + op.num_results() <= ir::kMaxRowYields &&
           c.instrs + InstrCount(op) <= ir::kMaxRowInstrs;
  }

  absl::StatusOr<bool> Fuse(ir::Function& f, const Cluster& c) {
    absl::flat_hash_set<const Op*> members(c.members.begin(), c.members.end());
    llvm::SmallVector<Value*, 8> inputs;
    absl::flat_hash_map<const Value*, RowRef> refs;
    auto ref = [&](Value* v) {
      if (auto it = refs.find(v); it != refs.end()) return it->second;
      RowRef r = RowRef::Input(static_cast<int>(inputs.size()));
      inputs.push_back(v);
      refs[v] = r;
      return r;
    };
    ir::RowProgram prog;
    auto emit = [&](RowInstr in) {
      prog.instrs.push_back(in);
      return RowRef::Temp(static_cast<int>(prog.instrs.size()) - 1);
    };
    for (Op* op : c.members) {
      const double eps = op->attrs().F64Or("eps", 0);
      switch (op->kind()) {
        case OpKind::kRmsNorm:
          refs[op->result(0)] = emit(
              {RowOpcode::kRmsNorm, ref(op->operand(0)), op->num_operands() > 1 ? ref(op->operand(1)) : RowRef{}, eps});
          break;
        case OpKind::kAdd:
        case OpKind::kMul:
          refs[op->result(0)] = emit(
              {op->is(OpKind::kAdd) ? RowOpcode::kAdd : RowOpcode::kMul, ref(op->operand(0)), ref(op->operand(1)), 0});
          break;
        case OpKind::kMulWeight:
          refs[op->result(0)] = emit({RowOpcode::kMulWeight, ref(op->operand(0)), ref(op->operand(1)), 0});
          break;
        case OpKind::kScale:
          refs[op->result(0)] = emit({RowOpcode::kScale, ref(op->operand(0)), {}, op->attrs().F64Or("factor", 1.0)});
          break;
        case OpKind::kTanh:
          refs[op->result(0)] = emit({RowOpcode::kTanh, ref(op->operand(0)), {}, 0});
          break;
        case OpKind::kAddRmsNorm: {
          const RowRef sum = emit({RowOpcode::kAdd, ref(op->operand(0)), ref(op->operand(1)), 0});
          refs[op->result(0)] = sum;
          refs[op->result(1)] = emit({RowOpcode::kRmsNorm, sum, ref(op->operand(2)), eps});
          break;
        }
        default:
          return absl::InternalError(absl::StrCat("fuse-rows: unexpected member ", op->Summary()));
      }
    }
    // Yields: the member results read outside the cluster, in definition order.
    llvm::SmallVector<Value*, 4> yielded;
    for (Op* op : c.members)
      for (Value* r : op->results()) {
        bool outside = false;
        for (const ir::Use& u : r->uses()) outside |= !members.contains(u.user);
        if (!outside) continue;
        yielded.push_back(r);
        prog.yields.push_back(refs.at(r));
      }
    if (yielded.empty()) return false;  // nothing read: dce's to remove
    PatternRewriter rw(f);
    MEMRA_ASSIGN_OR_RETURN(Op * fused,
                           rw.Create(c.members.back(), OpKind::kFusedRows, inputs, {{"program", prog.ToString()}}));
    for (size_t i = 0; i < yielded.size(); ++i) rw.Replace(yielded[i], fused->result(i));
    for (auto it = c.members.rbegin(); it != c.members.rend(); ++it) rw.Erase(*it);
    ++fused_;
    ops_fused_ += c.members.size();
    return true;
  }

  // Norms over wider rows stay unfused (a fused norm holds its row in one block's registers).
  bool NormWidthFits(const ir::TensorType& t) const {
    const ir::Dim& n = t.shape.back();
    return !n.IsConstant() || n.value() <= *max_norm_width_;
  }
  // Pointwise runs (no norm) may join clusters of any width; a norm over a wider row than this
  // does not join.
  Option<int64_t> max_norm_width_{this, "max-norm-width", "widest row a fused norm takes", 16384, 1, int64_t{1} << 30};
  Statistic fused_{this, "fused", "fused_rows ops made"};
  Statistic ops_fused_{this, "ops-fused", "row ops replaced by them"};
  Statistic closed_at_bounds_{this, "closed-at-bounds", "clusters closed at the program bounds (ir/RowProgram.h)"};
  Statistic too_wide_{this, "skipped-wide-norm", "norms over rows wider than max-norm-width left alone"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseRowsPass() { return std::make_unique<FuseRowsPass>(); }

}  // namespace memra::passes
