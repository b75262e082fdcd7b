#include "ir/Verifier.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/StatusMacros.h"
#include "ir/TypeInference.h"

namespace memra::ir {
namespace {

// Bytes a tensor of this type may hold, with its symbolic dims left out: past this a size computed
// in int64 (the arena planner's, an upload's) would overflow and plan nonsense.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;

// An error naming the type when its static dims (at 8 bytes an element, the widest dtype) exceed
// kMaxTensorBytes.
absl::Status CheckStaticSize(const TensorType& t) {
  int64_t bytes = 8;
  for (const Dim& d : t.shape.dims()) {
    if (!d.IsConstant()) continue;
    if (d.value() > 0 && __builtin_mul_overflow(bytes, d.value(), &bytes)) bytes = kMaxTensorBytes + 1;
    if (bytes > kMaxTensorBytes)
      return absl::InvalidArgumentError(
          absl::StrCat(t.ToString(), " is too large (more than 2^50 bytes: its size would overflow)"));
  }
  return absl::OkStatus();
}

std::string TypesToString(llvm::ArrayRef<TensorType> types) {
  if (types.empty()) return "no results";
  return absl::StrJoin(types, ", ", [](std::string* o, const TensorType& t) { o->append(t.ToString()); });
}

class FunctionVerifier {
 public:
  FunctionVerifier(const Function& f, const VerifyOptions& opts) : f_(f), opts_(opts) {}

  absl::Status Run() {
    for (unsigned i = 0; i < f_.num_arguments(); ++i) {
      defined_.insert(f_.argument(i));
      if (absl::Status st = CheckStaticSize(f_.argument(i)->type()); !st.ok())
        return FnError(absl::StrCat("argument #", i, ": ", st.message()));
    }
    const Op* ret = f_.ReturnOp();
    if (!ret)
      return FnError(f_.body()->empty() ? "function body is empty (expected a final 'return')"
                                        : "function body must end with 'return'");
    std::vector<Op*> ops = f_.Ops();
    for (size_t idx = 0; idx < ops.size(); ++idx) ops_index_[ops[idx]] = idx;
    for (size_t idx = 0; idx < ops.size(); ++idx) {
      MEMRA_RETURN_IF_ERROR(VerifyOp(*ops[idx], idx));
      for (Value* r : ops[idx]->results()) {
        defined_.insert(r);
        if (absl::Status st = CheckStaticSize(r->type()); !st.ok()) return OpError(*ops[idx], idx, st.message());
      }
    }
    // Return types.
    if (ret->num_operands() != f_.result_types().size())
      return OpError(*ret, ops.size() - 1,
                     absl::StrCat("returns ", ret->num_operands(), " values but the function declares ",
                                  f_.result_types().size(), " results"));
    for (unsigned i = 0; i < ret->num_operands(); ++i) {
      if (ret->operand(i)->type() != f_.result_types()[i])
        return OpError(*ret, ops.size() - 1,
                       absl::StrCat("result #", i, " has type ", ret->operand(i)->type().ToString(),
                                    " but the function declares ", f_.result_types()[i].ToString()));
    }
    return absl::OkStatus();
  }

 private:
  std::string Where(const Op& op, size_t idx) const {
    std::string loc;
    if (op.loc().known()) {
      loc = opts_.filename.empty() ? absl::StrCat(op.loc().ToString(), ": ")
                                   : absl::StrCat(opts_.filename, ":", op.loc().ToString(), ": ");
    }
    return absl::StrCat(loc, "in @", f_.name(), ", op #", idx, " '", op.mnemonic(), "'");
  }
  absl::Status OpError(const Op& op, size_t idx, absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(op, idx), ": ", msg, "\n  op: ", op.Summary()));
  }
  absl::Status FnError(absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("in @", f_.name(), ": ", msg));
  }

  absl::Status VerifyOp(const Op& op, size_t idx) {
    const OpInfo& info = op.info();
    // Structure.
    if (op.is(OpKind::kReturn) && &op != f_.ReturnOp())
      return OpError(op, idx, "'return' must be the last op of the function body");
    if (op.is(OpKind::kSegment) && op.parent_op()) return OpError(op, idx, "segments must not be nested");
    for (unsigned i = 0; i < op.num_operands(); ++i) {
      Value* v = op.operand(i);
      if (!v) return OpError(op, idx, absl::StrCat("operand #", i, " is missing (its definition was erased)"));
      if (v->is_global()) {
        if (!f_.module() || f_.module()->LookupGlobal(v->name()) != v)
          return OpError(
              op, idx,
              absl::StrCat("operand #", i, " refers to @", v->name(), " which is not declared in this module"));
        continue;
      }
      if (!defined_.contains(v)) {
        bool later = v->def() && v->def()->function() == &f_;
        return OpError(
            op, idx,
            later ? absl::StrCat("operand #", i, " %", v->name(), " does not dominate its use (defined later, by op #",
                                 ops_index_.contains(v->def()) ? ops_index_[v->def()] : -1,
                                 v->def() == &op ? " itself" : "", ")")
                  : absl::StrCat("operand #", i, " %", v->name(), " is not defined in this function"));
      }
    }
    if (absl::Status s = CheckSignature(op.kind(), op.operands(), op.attrs()); !s.ok())
      return OpError(op, idx, s.message());
    llvm::SmallVector<TensorType, 2> actual;
    for (Value* r : op.results()) actual.push_back(r->type());
    auto inferred = InferResultTypes(op.kind(), op.operands(), op.attrs(), actual);
    if (!inferred.ok()) return OpError(op, idx, inferred.status().message());
    if (llvm::ArrayRef<TensorType>(*inferred) != llvm::ArrayRef<TensorType>(actual))
      return OpError(op, idx,
                     absl::StrCat("result types (", TypesToString(actual), ") do not match the inferred (",
                                  TypesToString(*inferred), ")"));
    if (info.HasFlag(op_flags::kReadsState) || info.HasFlag(op_flags::kWritesState))
      MEMRA_RETURN_IF_ERROR(CheckState(op, idx));
    return absl::OkStatus();
  }

  absl::Status CheckState(const Op& op, size_t idx) {
    // Which state operands this op writes.
    llvm::SmallVector<Value*, 2> writes;
    switch (op.kind()) {
      case OpKind::kKvAppend:
      case OpKind::kGatedAttentionStep:  // appends, then reads what it appended
      case OpKind::kQkNormRopeAppend:
        writes = {op.operand(2), op.operand(3)};
        break;
      case OpKind::kConv1dCausal:
        writes = {op.operand(2)};
        break;
      case OpKind::kGatedDeltaScan:
        writes = {op.operand(5)};
        break;
      case OpKind::kDeltaNetStep:
        writes = {op.operand(8), op.operand(9)};
        break;
      case OpKind::kMatMulDeltaNetStep:
        writes = {op.operand(9), op.operand(10)};
        break;
      case OpKind::kAdvancePositions:
      case OpKind::kSeqAdvancePositions:
        writes = {op.operand(0)};
        break;
      case OpKind::kPagedKvAppend:
        writes = {op.operand(2), op.operand(3)};
        break;
      case OpKind::kSeqConv1dCausal:
        writes = {op.operand(2)};
        break;
      case OpKind::kSeqGatedDeltaScan:
        writes = {op.operand(5)};
        break;
      default:
        break;
    }
    if (op.is(OpKind::kAttention) || op.is(OpKind::kAttentionGated) || op.is(OpKind::kPagedAttention)) {
      for (unsigned i : {1u, 2u}) {
        Value* cache = op.operand(i);
        if (!written_by_.contains(cache))
          return OpError(op, idx,
                         absl::StrCat("state: attention reads KV cache @", cache->name(),
                                      " before any kv_append of this function wrote it"));
      }
    }
    if ((op.is(OpKind::kPositions) || op.is(OpKind::kSeqPositions)) && written_by_.contains(op.operand(0)))
      return OpError(op, idx,
                     absl::StrCat("state: position counter @", op.operand(0)->name(),
                                  " is read after advance_positions (op #", written_by_[op.operand(0)], ")"));
    for (Value* s : writes) {
      auto it = written_by_.find(s);
      if (it != written_by_.end())
        return OpError(op, idx,
                       absl::StrCat("state: @", s->name(), " is written twice in @", f_.name(), " (first by op #",
                                    it->second, ")"));
      written_by_[s] = idx;
    }
    return absl::OkStatus();
  }

  const Function& f_;
  const VerifyOptions& opts_;
  absl::flat_hash_set<const Value*> defined_;
  absl::flat_hash_map<const Op*, int64_t> ops_index_;
  absl::flat_hash_map<const Value*, size_t> written_by_;
};

absl::Status VerifyDecls(const Module& m) {
  for (const auto& w : m.weights()) {
    auto err = [&](absl::string_view msg) {
      return absl::InvalidArgumentError(absl::StrCat("weight @", w->name(), " : ", w->type().ToString(), ": ", msg));
    };
    if (!w->shape().IsStatic()) return err("weight shapes must be static");
    if (w->rank() == 0) return err("weights must have rank >= 1");
    for (const Dim& d : w->shape().dims())
      if (d.value() <= 0) return err("weight dims must be > 0");
    if (absl::Status st = CheckStaticSize(w->type()); !st.ok()) return err(st.message());
    int64_t block = InfoOf(w->dtype()).block_elems;
    if (w->shape().back().value() % block != 0)
      return err(absl::StrCat("rows of ", w->shape().back().value(), " elements are not a multiple of the ",
                              DTypeName(w->dtype()), " block size ", block));
  }
  for (const auto& s : m.states()) {
    auto err = [&](absl::string_view msg) {
      return absl::InvalidArgumentError(absl::StrCat("state ", StateKindName(s->state_kind()), " @", s->name(), " : ",
                                                     s->type().ToString(), ": ", msg));
    };
    if (!s->shape().IsStatic()) return err("state shapes must be static");
    for (const Dim& d : s->shape().dims())
      if (d.value() <= 0) return err("state dims must be > 0");
    if (absl::Status st = CheckStaticSize(s->type()); !st.ok()) return err(st.message());
    // A module lowered for several sequences (attribute slots = S > 0) keeps per-slot states
    // with S as dim 0 and a paged KV cache (ir/Ops.def, "sequences").
    const int64_t S = m.attrs().I64Or("slots", 0);
    const bool seq = S > 0;
    auto lead_s = [&]() { return !seq || s->shape()[0].value() == S; };
    switch (s->state_kind()) {
      case StateKind::kKv:
        if (seq) {
          if (s->rank() != 4 || !IsKvCacheDType(s->dtype()))
            return err("a paged kv state is float or q8_0 [NB, BS, Hkv, D]");
          if (s->shape()[1].value() != m.attrs().I64Or("kv_block", 0))
            return err("dim 1 of a paged kv state must be the module's kv_block");
        } else if (s->rank() != 3 || !IsKvCacheDType(s->dtype())) {
          return err("a kv state is float or q8_0 [C, Hkv, D]");
        }
        // q8_0 blocks of 32 tile each head's row.
        if (s->dtype() == DType::kQ8_0 && s->shape().dims().back().value() % 32 != 0)
          return err("a q8_0 kv state's head dim must be a multiple of 32");
        break;
      case StateKind::kConv:
        if (s->rank() != (seq ? 3 : 2) || !IsFloat(s->dtype()) || !lead_s())
          return err(seq ? "a conv state is float [S, C, K-1] (S = slots)" : "a conv state is float [C, K-1]");
        break;
      case StateKind::kDelta:
        if (s->rank() != (seq ? 4 : 3) || !IsFloat(s->dtype()) || !lead_s())
          return err(seq ? "a delta state is float [S, Hv, Dv, Dk] (S = slots)"
                         : "a delta state is float [Hv, Dv, Dk]");
        break;
      case StateKind::kPosition:
        if (s->type() != TensorType(DType::kI32, seq ? Shape{S} : Shape{}))
          return err(seq ? "a position state is i32[S] (S = slots)" : "a position state is i32[]");
        break;
      case StateKind::kBlocks:
        if (!seq) return err("a block table needs a module lowered with slots");
        if (s->rank() != 2 || s->dtype() != DType::kI32 || !lead_s()) return err("a block table is i32[S, MB]");
        if (s->shape()[1].value() * m.attrs().I64Or("kv_block", 0) < m.attrs().I64Or("n_ctx", 0))
          return err("MB * kv_block must cover the module's n_ctx");
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyFunction(const Function& f, const VerifyOptions& options) {
  return FunctionVerifier(f, options).Run();
}

absl::Status VerifyModule(const Module& m, const VerifyOptions& options) {
  MEMRA_RETURN_IF_ERROR(VerifyDecls(m));
  for (const auto& f : m.functions()) MEMRA_RETURN_IF_ERROR(VerifyFunction(*f, options));
  return absl::OkStatus();
}

}  // namespace memra::ir
