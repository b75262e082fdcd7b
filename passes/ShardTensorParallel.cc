// shard-tensor-parallel{tp=N}: partitions the module for N tensor-parallel ranks (Megatron's
// split), one module every rank runs with its own slices of the weights
// (docs/design/tensor-parallel.md):
//
//   %h = matmul(%x, @w_qkv)        : f32[T, 256]   ->  %h = matmul(%x, @w_qkv)  : f32[T, 128]
//   ... per-head ops ...                                ... the same ops on this rank's heads ...
//   %o = matmul(%a, @w_out)        : f32[T, 256]   ->  %p = matmul(%a, @w_out)  : f32[T, 256]
//                                                       %o = all_reduce(%p)     : f32[T, 256]
//
// A region is what lies between products whose input is replicated (column-parallel: their
// weight cut along its output rows) and products whose input is cut along its last dim
// (row-parallel: their weight cut along its input columns, their result a partial sum). It is
// found from each product backwards and forwards through the ops' split rules below (a head dim
// of attention, kv_append, the delta rule, conv channels, gates; never a dim a norm or softmax
// reduces over, never the tokens); every value of it must be cut consistently, every global it
// touches (weights, KV caches, recurrent states) in every function, or the product stays
// replicated. Within a region a dim may be a run of segments (the q | k | v channels of a fused
// projection, the value heads of the delta rule tiled over its key heads), each cut into parts;
// part p of every segment is rank p's, which keeps each op's per-head arithmetic unchanged on
// the local shapes. KV heads fewer than the ranks are replicated: rank r holds part r * Hkv / N.
//
// The routed experts are cut within each expert (gate / up rows, down columns: a partial sum,
// recorded as tp_mode = "tensor" on the op); the router and shared-expert gate stay replicated.
// Partial sums travel through linear ops (add of two partial sums, gated_add, scales) and are
// summed by one all_reduce before their first other use. The vocabulary head is cut by rows
// and followed by an all_gather (when its rows divide and the table is not also the embedding).
//
// Weights get their local shapes and shard_axis / shard_segments / shard_parts attributes
// (runtime/WeightShard.h reads them); the module gets tp = N. Run it on the lowered module,
// before the fusions and bucket-shapes (fused ops have no split rules: a region holding one
// stays replicated). tp = 1 changes nothing.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Builder.h"
#include "ir/Module.h"
#include "ir/StatusMacros.h"
#include "ir/TypeInference.h"
#include "passes/PassRegistry.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

constexpr int kReplicated = -1;

// How the cut points of two values of a region correspond.
struct Link {
  enum Kind { kSame, kScale, kPiece, kTile, kGroup } kind;
  Value* a;
  Value* b;
  int64_t p = 0, q = 0;  // kScale: b = a * p / q; kPiece: b = a[p, p + q); kTile: a tiles b q times, p = a's size
};

struct Cut {
  int dim = 0;
  std::set<int64_t> cuts;  // segment boundaries along dim, 0 and the size included
  int64_t parts = 0;
};

int64_t StaticDim(const Value* v, int d) {
  const ir::Dim& x = v->shape()[d];
  return x.IsConstant() ? x.value() : -1;
}

// "%name", or the op that defines an unnamed value, for messages.
std::string Named(const Value* v) {
  if (!v->name().empty()) return absl::StrCat(v->is_global() ? "@" : "%", v->name());
  if (v->def() != nullptr) return absl::StrCat("the result of ", v->def()->mnemonic());
  return "an argument";
}

bool IsHeadLocalUnary(OpKind k) {
  return ir::InfoOf(k).HasFlag(ir::op_flags::kUnary) || k == OpKind::kScale || k == OpKind::kCast;
}

// One region being grown from a product: the split dim of every value reached, the ops inside,
// the terminal products, the values that must stay whole.
struct Region {
  absl::flat_hash_map<Value*, int> dim;
  std::vector<Value*> order;  // values in the order reached
  absl::flat_hash_set<Op*> ops;
  std::vector<Op*> op_order;
  absl::flat_hash_set<Op*> column, row;
  absl::flat_hash_set<Value*> whole;
  std::string failure;
};

class ShardTensorParallelPass : public Pass {
 public:
  absl::string_view name() const override { return "shard-tensor-parallel"; }
  absl::string_view description() const override {
    return "Partitions the module for tp tensor-parallel ranks (column / row products, all_reduce, all_gather)";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    const int64_t tp = *tp_;
    if (tp < 1) return absl::InvalidArgumentError(absl::StrCat("shard-tensor-parallel: tp must be >= 1, got ", tp));
    if (m.attrs().I64Or("tp", 1) != 1)
      return absl::FailedPreconditionError("shard-tensor-parallel: the module is already partitioned (tp attribute)");
    if (tp == 1) return false;
    if (*experts_mode_ != "auto" && *experts_mode_ != "tensor" && *experts_mode_ != "expert")
      return absl::InvalidArgumentError(
          absl::StrCat("shard-tensor-parallel: experts=", *experts_mode_, ": expected auto, tensor or expert"));
    tp_n_ = tp;
    cut_.clear();
    partial_.clear();
    reasons_.clear();
    // Regions, from every product in program order of every function.
    for (const auto& f : m.functions()) {
      std::vector<Op*> ops;
      f->body()->CollectOps(ops);
      for (Op* op : ops) {
        if (!op->is(OpKind::kMatMul) || done_.contains(op)) continue;
        MEMRA_RETURN_IF_ERROR(TryRowProduct(op));
      }
      for (Op* op : ops)
        if (op->is(OpKind::kMoeExperts)) MEMRA_RETURN_IF_ERROR(TryExperts(op));
    }
    MEMRA_RETURN_IF_ERROR(ShardHeads(m));
    // A product an early candidate could not cut may be cut by a later region: no stale reason.
    for (Op* op : done_) op->attrs().Erase("tp_whole");
    for (const auto& f : m.functions()) {
      std::vector<Op*> ops;
      f->body()->CollectOps(ops);
      for (Op* op : ops) kept_ += op->attrs().Has("tp_whole");
    }
    if (cut_.empty())
      return absl::FailedPreconditionError(
          absl::StrCat("shard-tensor-parallel: nothing in the module can be cut into ", tp, " parts",
                       reasons_.empty() ? std::string() : absl::StrCat(" (", absl::StrJoin(reasons_, "; "), ")")));
    MEMRA_RETURN_IF_ERROR(Apply(m));
    MEMRA_RETURN_IF_ERROR(InsertAllReduces(m));
    m.attrs().Set("tp", tp);
    return true;
  }

 private:
  // ---- growing a region -------------------------------------------------------------------

  absl::Status TryRowProduct(Op* mm) {
    Value* x = mm->operand(0);
    if (x->is_global() || x->def() == nullptr || x->rank() < 1) return absl::OkStatus();
    Region r;
    Push(r, x, static_cast<int>(x->rank()) - 1);
    if (!Grow(r)) {
      // Most products are column products tried as row ones (failing at once on the norm that
      // feeds them): only a region that reached ops counts.
      if (!r.column.empty() || !r.ops.empty()) {
        mm->attrs().Set("tp_whole", r.failure);
        if (reasons_.size() < 4) reasons_.push_back(r.failure);
      }
      return absl::OkStatus();
    }
    if (r.column.empty()) return absl::OkStatus();  // nothing cut it: no region
    std::string why;
    std::map<Value*, Cut> cuts;
    if (!Resolve(r, cuts, why)) {
      mm->attrs().Set("tp_whole", why);
      if (reasons_.size() < 4) reasons_.push_back(why);
      return absl::OkStatus();
    }
    for (auto& [v, c] : cuts) cut_[v] = c;
    for (Op* op : r.column) done_.insert(op);
    for (Op* op : r.row) {
      done_.insert(op);
      partial_.push_back(op->result(0));
    }
    ++regions_;
    return absl::OkStatus();
  }

  void Push(Region& r, Value* v, int d) { work_.push_back({v, d}); }

  bool Fail(Region& r, std::string why) {
    if (r.failure.empty()) r.failure = std::move(why);
    work_.clear();
    return false;
  }

  bool Grow(Region& r) {
    while (!work_.empty()) {
      auto [v, d] = work_.back();
      work_.pop_back();
      if (auto it = r.dim.find(v); it != r.dim.end()) {
        if (it->second != d) return Fail(r, absl::StrCat(Named(v), " would be cut along two dims"));
        continue;
      }
      if (cut_.contains(v)) return Fail(r, absl::StrCat(Named(v), " belongs to another region"));
      if (!v->is_global() && d == 0) return Fail(r, absl::StrCat(Named(v), " would be cut along its tokens"));
      if (d < 0 || d >= v->rank() || StaticDim(v, d) < 0)
        return Fail(r, absl::StrCat(Named(v), " has no static dim ", d));
      r.dim[v] = d;
      r.order.push_back(v);
      if (Op* def = v->def(); def != nullptr)
        if (!Visit(r, def, def->num_operands() + v->index(), d)) return false;
      for (const ir::Use& u : v->uses())
        if (!Visit(r, u.user, u.operand_index, d)) return false;
    }
    for (Value* v : r.whole)
      if (r.dim.contains(v)) return Fail(r, absl::StrCat(Named(v), " must stay whole"));
    return true;
  }

  // `op`'s position `pos` (operands, then results) is cut along `d`: the rest of the op follows.
  bool Visit(Region& r, Op* op, unsigned pos, int d) {
    const unsigned nops = op->num_operands();
    auto at = [&](unsigned p) -> Value* { return p < nops ? op->operand(p) : op->result(p - nops); };
    if (op->is(OpKind::kMatMul)) {
      Value* x = op->operand(0);
      Value* w = op->operand(1);
      Value* y = op->result(0);
      const int last = static_cast<int>(y->rank()) - 1;
      const bool column = (pos == nops && d == last) || (pos == 1 && d == 0);
      const bool row = (pos == 0 && d == static_cast<int>(x->rank()) - 1) || (pos == 1 && d == 1);
      if (column) {
        if (r.row.contains(op)) return Fail(r, absl::StrCat(op->Summary(), " would be cut both ways"));
        if (r.column.insert(op).second) {
          r.whole.insert(x);
          Push(r, w, 0);
          Push(r, y, last);
        }
        return true;
      }
      if (row) {
        if (r.column.contains(op)) return Fail(r, absl::StrCat(op->Summary(), " would be cut both ways"));
        if (r.row.insert(op).second) {
          Push(r, x, static_cast<int>(x->rank()) - 1);
          Push(r, w, 1);
        }
        return true;
      }
      return Fail(r, absl::StrCat(op->Summary(), " cannot be cut along dim ", d, " of operand ", pos));
    }
    if (op->is(OpKind::kReturn)) return Fail(r, "a cut value is a function result");
    std::vector<int> dims;
    std::string why;
    if (!Rule(*op, pos, d, dims, why)) return Fail(r, absl::StrCat(op->Summary(), ": ", why));
    if (r.ops.insert(op).second) r.op_order.push_back(op);
    for (unsigned p = 0; p < dims.size(); ++p) {
      Value* v = at(p);
      if (dims[p] == kReplicated)
        r.whole.insert(v);
      else
        Push(r, v, dims[p]);
    }
    return true;
  }

  // The split dims of every position of `op` (operands, then results) given position `pos` cut
  // along `d`; false (with why) when the op cannot be cut so.
  static bool Rule(const Op& op, unsigned pos, int d, std::vector<int>& dims, std::string& why) {
    const unsigned nops = op.num_operands(), n = nops + op.num_results();
    auto rank_at = [&](unsigned p) {
      return static_cast<int>((p < nops ? op.operand(p) : op.result(p - nops))->rank());
    };
    dims.assign(n, kReplicated);
    auto all = [&](int dd) {
      for (unsigned p = 0; p < n; ++p) dims[p] = dd;
    };
    auto not_last = [&]() {
      if (d == rank_at(pos) - 1) {
        why = "its last dim is reduced over";
        return false;
      }
      return true;
    };
    const OpKind k = op.kind();
    if (IsHeadLocalUnary(k) || k == OpKind::kSwiglu || k == OpKind::kTakeLastRow) {
      if (k == OpKind::kTakeLastRow && d == 0) return why = "the tokens are not cut", false;
      all(d);
      return true;
    }
    switch (k) {
      case OpKind::kAdd:
      case OpKind::kMul: {
        const int ra = static_cast<int>(op.operand(0)->rank()), rb = static_cast<int>(op.operand(1)->rank());
        const int da = pos == 1 ? d + (ra - rb) : d;  // the dim in a's (and y's) terms
        dims[0] = da;
        dims[2] = da;
        dims[1] = da - (ra - rb) >= 0 ? da - (ra - rb) : kReplicated;
        return true;
      }
      case OpKind::kRmsNorm:
      case OpKind::kL2Norm:
      case OpKind::kSoftmax:
      case OpKind::kMulWeight:
        if (!not_last()) return false;
        dims[0] = d;
        dims[nops] = d;  // the weight (operand 1, if any) stays whole
        return true;
      case OpKind::kMulRows:
      case OpKind::kGatedAdd:
      case OpKind::kGatedRmsNorm:
        if (!not_last()) return false;
        all(d);
        if (k == OpKind::kGatedRmsNorm) dims[2] = kReplicated;
        return true;
      case OpKind::kQGateSplit:
        if (d != 1) return why = "only its heads are cut", false;
        all(1);
        return true;
      case OpKind::kRope:
        if (d != 1 || op.result(0)->rank() != 3) return why = "only its heads are cut", false;
        dims[0] = 1;
        dims[nops] = 1;
        return true;
      case OpKind::kKvAppend:  // k, v [T, H, D]; caches [C, H, D]; pos
        if (d != 1) return why = "only its KV heads are cut", false;
        dims[0] = dims[1] = dims[2] = dims[3] = 1;
        return true;
      case OpKind::kAttention:
      case OpKind::kAttentionGated:  // q, caches, pos (, gate) -> o
        if (d != 1) return why = "only its heads are cut", false;
        dims[0] = dims[1] = dims[2] = 1;
        if (k == OpKind::kAttentionGated) dims[4] = 1;
        dims[nops] = 1;
        return true;
      case OpKind::kPagedKvAppend:  // k, v [T, H, D]; caches [NB, BS, H, D]; blocks, pos, slot
        if ((pos <= 1 && d != 1) || ((pos == 2 || pos == 3) && d != 2)) return why = "only its KV heads are cut", false;
        dims[0] = dims[1] = 1;
        dims[2] = dims[3] = 2;
        return true;
      case OpKind::kPagedAttention:  // q, caches, blocks, pos, slot -> o
        if (((pos == 0 || pos == nops) && d != 1) || ((pos == 1 || pos == 2) && d != 2))
          return why = "only its heads are cut", false;
        dims[0] = 1;
        dims[1] = dims[2] = 2;
        dims[nops] = 1;
        return true;
      case OpKind::kConv1dCausal:  // x [T, C], w [C, K], state [C, K-1] -> y [T, C]
        if (((pos == 0 || pos == nops) && d != 1) || ((pos == 1 || pos == 2) && d != 0))
          return why = "only its channels are cut", false;
        dims[0] = 1;
        dims[1] = dims[2] = 0;
        dims[nops] = 1;
        return true;
      case OpKind::kSeqConv1dCausal:  // x, w, state [S, C, K-1], seq_slot, seq_start -> y
        if (((pos == 0 || pos == nops) && d != 1) || (pos == 1 && d != 0) || (pos == 2 && d != 1))
          return why = "only its channels are cut", false;
        dims[0] = 1;
        dims[1] = 0;
        dims[2] = 1;
        dims[nops] = 1;
        return true;
      case OpKind::kDeltaNetGates:  // b, a [T, Hv]; dt_bias, ssm_a [Hv] -> beta, g [T, Hv]
        if (((pos == 2 || pos == 3) && d != 0) || (pos != 2 && pos != 3 && d != 1))
          return why = "only its heads are cut", false;
        dims[0] = dims[1] = 1;
        dims[2] = dims[3] = 0;
        dims[nops] = dims[nops + 1] = 1;
        return true;
      case OpKind::kGatedDeltaScan:       // q, k, v, g, beta, state [Hv, Dv, Dk] -> o
      case OpKind::kSeqGatedDeltaScan: {  // ..., state [S, Hv, Dv, Dk], seq_slot, seq_start -> o
        const int sd = k == OpKind::kGatedDeltaScan ? 0 : 1;
        if ((pos == 5 && d != sd) || (pos != 5 && d != 1)) return why = "only its heads are cut", false;
        dims[0] = dims[1] = dims[2] = dims[3] = dims[4] = 1;
        dims[5] = sd;
        dims[nops] = 1;
        return true;
      }
      case OpKind::kSplit:
      case OpKind::kConcat:
      case OpKind::kView:
        all(d);
        return true;
      case OpKind::kReshape: {
        // The cut dim must survive: the same outer elements before it, the same elements from it on.
        const Value* from = pos == 0 ? op.operand(0) : op.result(0);
        const Value* to = pos == 0 ? op.result(0) : op.operand(0);
        int e = -1;
        if (!ReshapeDim(from, d, to, &e)) return why = "the reshape does not keep the cut dim", false;
        dims[0] = pos == 0 ? d : e;
        dims[1] = pos == 0 ? e : d;
        return true;
      }
      default:
        why = "no split rule";
        return false;
    }
  }

  // The dim of `to` a cut along dim `d` of `from` becomes through a reshape: the same outer element
  // count and the same element count from the dim on; its cut points scale by inner(from) /
  // inner(to).
  static bool ReshapeDim(const Value* from, int d, const Value* to, int* e) {
    // Element counts of a run of dims: the static product and the symbolic dims' names.
    auto count = [](const Value* v, int a, int b) {
      int64_t p = 1;
      std::vector<std::string> syms;
      for (int i = a; i < b; ++i) {
        const int64_t x = StaticDim(v, i);
        if (x < 0)
          syms.push_back(v->shape()[i].ToString());
        else
          p *= x;
      }
      std::sort(syms.begin(), syms.end());
      return std::make_pair(p, absl::StrJoin(syms, "*"));
    };
    const int rf = static_cast<int>(from->rank()), rt = static_cast<int>(to->rank());
    const auto outer = count(from, 0, d), rest = count(from, d, rf);
    if (!rest.second.empty()) return false;
    // The outermost match past the tokens (dim 0 of every activation, static 1 in decode):
    // [T, 64] -> [T, 1, 64] cuts the one head, not its elements.
    for (int j = 1; j < rt; ++j) {
      if (StaticDim(to, j) < 1) continue;
      if (count(to, 0, j) == outer && count(to, j, rt) == rest) {
        *e = j;
        return true;
      }
    }
    return false;
  }

  // ---- cut points and parts ---------------------------------------------------------------

  // Links between the values of `r` (every op of it and its terminal products).
  std::vector<Link> Links(const Region& r) {
    std::vector<Link> links;
    auto same = [&](Value* a, Value* b) {
      if (a != b && r.dim.contains(a) && r.dim.contains(b)) links.push_back({Link::kSame, a, b});
    };
    for (Op* op : r.column) same(op->operand(1), op->result(0));
    for (Op* op : r.row) same(op->operand(0), op->operand(1));
    for (Op* op : r.op_order) {
      const unsigned nops = op->num_operands();
      std::vector<Value*> vals;
      for (unsigned i = 0; i < nops; ++i) vals.push_back(op->operand(i));
      for (unsigned i = 0; i < op->num_results(); ++i) vals.push_back(op->result(i));
      switch (op->kind()) {
        case OpKind::kQGateSplit: {
          const int64_t hd = op->attrs().I64Or("head_dim", 1);
          links.push_back({Link::kScale, op->result(0), op->operand(0), 2 * hd, 1});
          same(op->result(0), op->result(1));
          break;
        }
        case OpKind::kReshape: {
          Value* x = op->operand(0);
          Value* y = op->result(0);
          const int dx = r.dim.at(x), dy = r.dim.at(y);
          int64_t ix = 1, iy = 1;
          for (int i = dx + 1; i < x->rank(); ++i) ix *= StaticDim(x, i);
          for (int i = dy + 1; i < y->rank(); ++i) iy *= StaticDim(y, i);
          links.push_back({Link::kScale, x, y, ix, iy});
          break;
        }
        case OpKind::kSplit:
        case OpKind::kView: {
          Value* x = op->operand(0);
          int64_t axis = op->attrs().I64Or("axis", 0);
          if (axis < 0) axis += x->rank();
          if (r.dim.at(x) != axis) {
            for (unsigned i = 0; i < op->num_results(); ++i) same(x, op->result(i));
            break;
          }
          std::vector<int64_t> sizes = op->is(OpKind::kSplit)
                                           ? op->attrs().GetI64Array("sizes").value_or(std::vector<int64_t>{})
                                           : std::vector<int64_t>{op->attrs().I64Or("size", 0)};
          int64_t off = op->is(OpKind::kView) ? op->attrs().I64Or("offset", 0) : 0;
          for (unsigned i = 0; i < op->num_results() && i < sizes.size(); ++i) {
            links.push_back({Link::kPiece, x, op->result(i), off, sizes[i]});
            off += sizes[i];
          }
          break;
        }
        case OpKind::kConcat: {
          Value* y = op->result(0);
          int64_t axis = op->attrs().I64Or("axis", 0);
          if (axis < 0) axis += y->rank();
          if (r.dim.at(y) != axis) {
            for (unsigned i = 0; i < nops; ++i) same(op->operand(i), y);
            break;
          }
          int64_t off = 0;
          for (unsigned i = 0; i < nops; ++i) {
            const int64_t len = StaticDim(op->operand(i), static_cast<int>(axis));
            links.push_back({Link::kPiece, y, op->operand(i), off, len});
            off += len;
          }
          break;
        }
        case OpKind::kGatedDeltaScan:
        case OpKind::kSeqGatedDeltaScan: {
          same(vals[0], vals[1]);
          for (unsigned i : {3u, 4u, 5u, nops}) same(vals[2], vals[i]);
          const int64_t hk = StaticDim(vals[1], 1), hv = StaticDim(vals[2], 1);
          links.push_back({Link::kTile, vals[1], vals[2], hk, hk > 0 ? hv / hk : 0});
          break;
        }
        case OpKind::kKvAppend:
        case OpKind::kPagedKvAppend:
          same(vals[0], vals[2]);
          same(vals[1], vals[3]);
          same(vals[0], vals[1]);
          break;
        case OpKind::kAttention:
        case OpKind::kAttentionGated:
        case OpKind::kPagedAttention:
          same(vals[1], vals[2]);
          same(vals[0], vals[nops]);
          if (op->is(OpKind::kAttentionGated)) same(vals[0], vals[4]);
          links.push_back({Link::kGroup, vals[0], vals[1]});
          break;
        default:
          for (size_t i = 1; i < vals.size(); ++i) same(vals[0], vals[i]);
          break;
      }
    }
    return links;
  }

  // Cut points of every value of `r` consistent over its links, and the parts of each value;
  // false (with why) when a segment does not divide.
  bool Resolve(const Region& r, std::map<Value*, Cut>& out, std::string& why) {
    std::vector<Link> links = Links(r);
    absl::flat_hash_map<Value*, std::set<int64_t>> cuts;
    for (Value* v : r.order) cuts[v] = {0, StaticDim(v, r.dim.at(v))};
    auto add = [&](Value* v, int64_t c, bool& changed) -> bool {
      if (c < 0 || c > *cuts[v].rbegin()) return false;
      changed |= cuts[v].insert(c).second;
      return true;
    };
    bool changed = true;
    for (int round = 0; changed && round < 64; ++round) {
      changed = false;
      for (const Link& l : links) {
        std::set<int64_t> a = cuts[l.a], b = cuts[l.b];
        switch (l.kind) {
          case Link::kSame:
            for (int64_t c : a)
              if (!add(l.b, c, changed)) return why = "sizes differ across an op", false;
            for (int64_t c : b)
              if (!add(l.a, c, changed)) return why = "sizes differ across an op", false;
            break;
          case Link::kScale:  // b = a * p / q
            for (int64_t c : a) {
              if ((c * l.p) % l.q != 0)
                return why = absl::StrCat("a cut of ", Named(l.a), " falls inside a row"), false;
              if (!add(l.b, c * l.p / l.q, changed)) return why = "a reshape moves a cut outside the dim", false;
            }
            for (int64_t c : b) {
              if ((c * l.q) % l.p != 0)
                return why = absl::StrCat("a cut of ", Named(l.b), " falls inside a head of ", Named(l.a)), false;
              if (!add(l.a, c * l.q / l.p, changed)) return why = "a reshape moves a cut outside the dim", false;
            }
            break;
          case Link::kPiece:  // b = a[p, p + q)
            if (!add(l.a, l.p, changed) || !add(l.a, l.p + l.q, changed)) return why = "a piece outside its dim", false;
            for (int64_t c : a)
              if (c >= l.p && c <= l.p + l.q) add(l.b, c - l.p, changed);
            for (int64_t c : b) add(l.a, c + l.p, changed);
            break;
          case Link::kTile:  // b = q copies of a's pattern, a of size p
            for (int64_t m = 0; m < l.q; ++m) {
              for (int64_t c : a) add(l.b, c + m * l.p, changed);
              for (int64_t c : b)
                if (c >= m * l.p && c <= (m + 1) * l.p) add(l.a, c - m * l.p, changed);
            }
            break;
          case Link::kGroup:
            break;
        }
      }
    }
    if (changed) return why = "the cut points do not settle", false;
    // Parts: tp everywhere but on the KV side of attention with fewer KV heads than ranks.
    absl::flat_hash_map<Value*, int64_t> parts;
    for (const Link& l : links) {
      if (l.kind != Link::kGroup) continue;
      const int64_t hq = StaticDim(l.a, r.dim.at(l.a)), hkv = StaticDim(l.b, r.dim.at(l.b));
      if (cuts[l.a].size() != 2 || cuts[l.b].size() != 2) return why = "attention heads in several segments", false;
      if (hq % tp_n_ != 0) return why = absl::StrCat(hq, " query heads do not divide into ", tp_n_), false;
      int64_t pkv = tp_n_;
      if (hkv % tp_n_ != 0) {
        if (tp_n_ % hkv != 0)
          return why = absl::StrCat(hkv, " KV heads neither divide into nor among ", tp_n_, " ranks"), false;
        pkv = hkv;
      }
      parts[l.a] = tp_n_;
      parts[l.b] = pkv;
    }
    changed = true;
    while (changed) {
      changed = false;
      for (const Link& l : links) {
        if (l.kind == Link::kGroup) continue;
        auto ia = parts.find(l.a), ib = parts.find(l.b);
        if (ia != parts.end() && ib != parts.end()) {
          if (ia->second != ib->second) return why = absl::StrCat(Named(l.a), " is cut two ways"), false;
        } else if (ia != parts.end()) {
          parts[l.b] = ia->second;
          changed = true;
        } else if (ib != parts.end()) {
          parts[l.a] = ib->second;
          changed = true;
        }
      }
    }
    for (Value* v : r.order) {
      Cut c;
      c.dim = r.dim.at(v);
      c.cuts = cuts[v];
      c.parts = parts.contains(v) ? parts[v] : tp_n_;
      for (auto it = std::next(c.cuts.begin()); it != c.cuts.end(); ++it) {
        const int64_t len = *it - *std::prev(it);
        if (len % c.parts != 0)
          return why = absl::StrCat(Named(v), ": a segment of ", len, " does not divide into ", c.parts), false;
      }
      // A weight cut inside its rows keeps whole quantization blocks.
      if (v->kind() == Value::Kind::kWeight && c.dim == v->rank() - 1) {
        const ir::DTypeInfo& info = ir::InfoOf(v->dtype());
        for (auto it = std::next(c.cuts.begin()); it != c.cuts.end(); ++it)
          if (((*it - *std::prev(it)) / c.parts) % info.block_elems != 0)
            return why = absl::StrCat("@", v->name(), ": a part of its rows is not whole ", info.name, " blocks"),
                   false;
      }
      out[v] = std::move(c);
    }
    return true;
  }

  // ---- the experts and the head -----------------------------------------------------------

  // moe_experts: cut within each expert (gate / up rows, down columns: "tensor") or across the
  // experts (each rank a part of them: "expert"), per layer by the cost rule below; its result a
  // partial sum either way.
  absl::Status TryExperts(Op* op) {
    if (done_.contains(op)) return absl::OkStatus();
    // Every function's expert op of this layer reads the same weights: cut them all or none.
    Value* down = op->operand(3);
    std::vector<Op*> users;
    bool shared = true;
    for (const ir::Use& u : down->uses()) {
      Op* o = u.user;
      shared &= o->is(OpKind::kMoeExperts) && u.operand_index == 3 && o->num_operands() == op->num_operands();
      for (unsigned i = 3; shared && i < op->num_operands(); ++i) shared &= o->operand(i) == op->operand(i);
      if (std::find(users.begin(), users.end(), o) == users.end()) users.push_back(o);
    }
    std::vector<Value*> stacks;
    for (unsigned i = 3; i < op->num_operands(); ++i) stacks.push_back(op->operand(i));
    for (Value* w : stacks) {
      shared &= !cut_.contains(w);
      for (const ir::Use& u : w->uses()) shared &= std::find(users.begin(), users.end(), u.user) != users.end();
    }
    auto keep = [&](const std::string& why) {
      for (Op* o : users) o->attrs().Set("tp_whole", why);
      if (reasons_.size() < 4) reasons_.push_back(absl::StrCat(op->Summary(), ": ", why));
      return absl::OkStatus();
    };
    if (!shared) return keep("the expert weights are read by other ops too");
    const int64_t e = StaticDim(down, 0), f = StaticDim(down, 2);
    const bool fused = op->num_operands() == 5;
    const int64_t block = ir::InfoOf(down->dtype()).block_elems;
    const bool tensor_ok = f > 0 && f % tp_n_ == 0 && (f / tp_n_) % block == 0;
    const bool expert_ok = e > 0 && e % tp_n_ == 0;
    // The cost rule: bytes the busiest rank streams for one token's k experts. Cut within the
    // experts every rank reads 1 / tp of each; cut across them a rank reads its selected experts
    // whole, and the routing decides how many land on the busiest rank (E[max] of k distinct
    // experts drawn from tp equal parts). Per-call overheads are not in it yet.
    const int64_t k = StaticDim(op->operand(2), 1);
    double expert_bytes = 0;
    for (Value* w : stacks) expert_bytes += WeightBytes(w) / std::max<int64_t>(e, 1);
    const double tensor_cost = k * expert_bytes / tp_n_;
    const double expert_cost = (expert_ok ? ExpectedBusiest(e, k, tp_n_) : k) * expert_bytes;
    std::string mode;
    if (*experts_mode_ == "tensor" || *experts_mode_ == "expert") {
      mode = *experts_mode_;  // forced (benchmarks, tests); refused where it cannot cut
      if (mode == "tensor" ? !tensor_ok : !expert_ok)
        return keep(absl::StrCat("experts=", mode, ": ",
                                 mode == "tensor" ? absl::StrCat("the experts' width ", f, " does not cut into ", tp_n_,
                                                                 " parts of whole blocks")
                                                  : absl::StrCat(e, " experts do not divide into ", tp_n_)));
    } else if (tensor_ok && (!expert_ok || tensor_cost <= expert_cost))
      mode = "tensor";
    else if (expert_ok)
      mode = "expert";
    else
      return keep(absl::StrCat("the experts' width ", f, " does not cut into ", tp_n_, " parts of whole ",
                               ir::InfoOf(down->dtype()).name, " blocks, and their number ", e, " not into ", tp_n_,
                               " parts"));
    for (Value* w : stacks) {
      Cut c;
      c.parts = tp_n_;
      if (mode == "expert") {
        c.dim = 0;
        c.cuts = {0, e};
      } else if (w == down) {
        c.dim = 2;
        c.cuts = {0, f};
      } else {
        c.dim = 1;
        c.cuts = fused ? std::set<int64_t>{0, f, 2 * f} : std::set<int64_t>{0, f};
      }
      cut_[w] = c;
    }
    for (Op* o : users) {
      o->attrs().Set("tp_mode", mode);
      o->attrs().Set("tp_bytes_tensor", static_cast<int64_t>(tensor_cost));
      o->attrs().Set("tp_bytes_expert", static_cast<int64_t>(expert_cost));
      if (mode == "expert") o->attrs().Set("expert_parts", tp_n_);
      done_.insert(o);
      partial_.push_back(o->result(0));
    }
    ++(mode == "expert" ? experts_across_ : experts_);
    return absl::OkStatus();
  }

  // Stored bytes of a weight (its global shape: before the cut).
  static double WeightBytes(const Value* w) {
    const ir::DTypeInfo& info = ir::InfoOf(w->dtype());
    double n = 1;
    for (int d = 0; d < w->rank(); ++d) n *= static_cast<double>(StaticDim(w, d));
    return n / static_cast<double>(info.block_elems) * static_cast<double>(info.block_bytes);
  }

  // E[the most of k distinct experts, drawn uniformly from e, that fall in one of `parts` equal
  // parts]: sum over m of P(max > m), P(max <= m) = [x^k] (sum_{j<=m} C(e/parts, j) x^j)^parts / C(e, k).
  static double ExpectedBusiest(int64_t e, int64_t k, int64_t parts) {
    const int64_t per = e / parts;
    auto choose = [](int64_t n, int64_t r) {
      double c = 1;
      for (int64_t i = 1; i <= r; ++i) c = c * static_cast<double>(n - r + i) / static_cast<double>(i);
      return c;
    };
    const double total = choose(e, k);
    double expect = 0;
    for (int64_t m = 0; m < k; ++m) {
      std::vector<double> poly(static_cast<size_t>(k) + 1, 0.0);
      poly[0] = 1;
      for (int64_t p = 0; p < parts; ++p) {
        std::vector<double> next(poly.size(), 0.0);
        for (int64_t a = 0; a <= k; ++a)
          for (int64_t j = 0; j <= std::min(m, per) && a + j <= k; ++j) next[a + j] += poly[a] * choose(per, j);
        poly = std::move(next);
      }
      expect += 1.0 - poly[k] / total;
    }
    return expect;
  }

  // The vocabulary head: a product with a whole weight whose result reaches a function result
  // through row-wise ops only, cut by rows and followed by an all_gather.
  absl::Status ShardHeads(ir::Module& m) {
    for (const auto& f : m.functions()) {
      std::vector<Op*> ops;
      f->body()->CollectOps(ops);
      for (Op* ret : ops) {
        if (!ret->is(OpKind::kReturn)) continue;
        for (Value* v : ret->operands()) {
          Op* def = v->def();
          while (def && (def->is(OpKind::kTakeLastRow) || def->is(OpKind::kScale) || def->is(OpKind::kTanh) ||
                         def->is(OpKind::kArgmax) || def->is(OpKind::kSample) || def->is(OpKind::kTakeSeqLastRows)))
            def = def->operand(0)->def();
          if (def == nullptr || !def->is(OpKind::kMatMul) || done_.contains(def)) continue;
          Value* w = def->operand(1);
          if (cut_.contains(w) || cut_.contains(def->operand(0))) continue;
          const int64_t vocab = StaticDim(w, 0);
          bool only_products = true;
          for (const ir::Use& u : w->uses()) only_products &= u.user->is(OpKind::kMatMul) && u.operand_index == 1;
          if (vocab <= 0 || vocab % tp_n_ != 0 || !only_products) {
            ++whole_heads_;
            def->attrs().Set("tp_whole", !only_products
                                             ? std::string("its table is also read whole (a tied embedding)")
                                             : absl::StrCat("its ", vocab, " rows do not divide into ", tp_n_));
            continue;
          }
          Cut c;
          c.dim = 0;
          c.cuts = {0, vocab};
          c.parts = tp_n_;
          cut_[w] = c;
          for (const ir::Use& u : w->uses()) {
            Op* mm = u.user;
            Value* y = mm->result(0);
            Cut cy;
            cy.dim = static_cast<int>(y->rank()) - 1;
            cy.cuts = {0, vocab};
            cy.parts = tp_n_;
            cut_[y] = cy;
            gathered_.push_back(y);
            done_.insert(mm);
          }
          ++heads_;
        }
      }
    }
    return absl::OkStatus();
  }

  // ---- rewriting --------------------------------------------------------------------------

  absl::Status Apply(ir::Module& m) {
    auto local = [&](Value* v, const Cut& c) {
      return v->type().shape.WithDim(c.dim, ir::Dim(*c.cuts.rbegin() / c.parts));
    };
    for (auto& [v, c] : cut_) {
      const int64_t size = *c.cuts.rbegin();
      std::vector<int64_t> segs;
      for (auto it = std::next(c.cuts.begin()); it != c.cuts.end(); ++it) segs.push_back(*it - *std::prev(it));
      if (auto* w = llvm::dyn_cast<ir::Weight>(v)) {
        w->attrs().Set("shard_axis", static_cast<int64_t>(c.dim));
        w->attrs().Set("shard_segments", segs);
        w->attrs().Set("shard_parts", c.parts);
      } else if (auto* s = llvm::dyn_cast<ir::StateVar>(v)) {
        s->attrs().Set("shard_axis", static_cast<int64_t>(c.dim));
        s->attrs().Set("shard_parts", c.parts);
      }
      (void)size;
      v->set_type(ir::TensorType(v->dtype(), local(v, c)));
    }
    // Attributes that name sizes of cut dims.
    for (const auto& f : m.functions()) {
      std::vector<Op*> ops;
      f->body()->CollectOps(ops);
      for (Op* op : ops) {
        if (op->is(OpKind::kQGateSplit) && cut_.contains(op->result(0)))
          op->attrs().Set("n_head", StaticDim(op->result(0), 1));
        if ((op->is(OpKind::kSplit) || op->is(OpKind::kView)) && cut_.contains(op->operand(0))) {
          const Cut& c = cut_.at(op->operand(0));
          int64_t axis = op->attrs().I64Or("axis", 0);
          if (axis < 0) axis += op->operand(0)->rank();
          if (axis != c.dim) continue;
          if (op->is(OpKind::kSplit)) {
            std::vector<int64_t> sizes;
            for (Value* r : op->results()) sizes.push_back(StaticDim(r, static_cast<int>(axis)));
            op->attrs().Set("sizes", sizes);
          } else {
            // The offset counts this rank's parts of the segments before it.
            const int64_t off = op->attrs().I64Or("offset", 0);
            int64_t local_off = 0, prev = 0;
            for (int64_t cpt : c.cuts) {
              if (cpt == 0) continue;
              if (cpt > off) break;
              local_off += (cpt - prev) / c.parts;
              prev = cpt;
            }
            op->attrs().Set("offset", local_off);
            op->attrs().Set("size", StaticDim(op->result(0), static_cast<int>(axis)));
          }
        }
      }
      // Every op's types still follow from its operands.
      for (Op* op : ops) {
        if (op->is(OpKind::kSegment) || op->is(OpKind::kReturn)) continue;
        llvm::SmallVector<ir::TensorType, 2> declared;
        for (Value* r : op->results()) declared.push_back(r->type());
        MEMRA_RETURN_IF_ERROR(ir::CheckSignature(op->kind(), op->operands(), op->attrs()));
        auto types = ir::InferResultTypes(op->kind(), op->operands(), op->attrs(), declared);
        if (!types.ok())
          return absl::InternalError(
              absl::StrCat("shard-tensor-parallel: ", op->Summary(), " after the cut: ", types.status().message()));
        for (unsigned i = 0; i < op->num_results(); ++i)
          if (!((*types)[i] == op->result(i)->type()))
            return absl::InternalError(absl::StrCat("shard-tensor-parallel: ", op->Summary(), " result ", i, " is ",
                                                    op->result(i)->type().ToString(), " but infers ",
                                                    (*types)[i].ToString()));
      }
    }
    // The head's all_gather, right after the product.
    for (Value* y : gathered_) {
      const Cut& c = cut_.at(y);
      MEMRA_RETURN_IF_ERROR(
          Collect(y, OpKind::kAllGather, {{"axis", static_cast<int64_t>(c.dim)}, {"parts", tp_n_}}, ".part"));
      ++gathers_;
    }
    return absl::OkStatus();
  }

  // A partial sum flows on through ops linear in it; one all_reduce before its first other use.
  absl::Status InsertAllReduces(ir::Module& m) {
    std::vector<Value*> work = partial_;
    absl::flat_hash_set<Value*> partial(work.begin(), work.end());
    while (!work.empty()) {
      Value* v = work.back();
      work.pop_back();
      Op* user = v->num_uses() == 1 ? v->uses()[0].user : nullptr;
      if (user != nullptr && LinearInPartials(*user, partial)) {
        Value* y = user->result(0);
        if (partial.insert(y).second) work.push_back(y);
        continue;
      }
      MEMRA_RETURN_IF_ERROR(Collect(v, OpKind::kAllReduce, {}, ".partial"));
      ++all_reduces_;
    }
    (void)m;
    return absl::OkStatus();
  }

  // A collective of `v` right after its definition takes over v's uses and its name (v keeps it
  // with `suffix`: %attn.partial, %logits.part).
  static absl::Status Collect(Value* v, OpKind kind, ir::AttrDict attrs, absl::string_view suffix) {
    Op* def = v->def();
    ir::OpBuilder b(def->parent_block(), std::next(ir::Block::iterator(*def)));
    MEMRA_ASSIGN_OR_RETURN(Op * c, b.Create(kind, {v}, std::move(attrs)));
    const std::string name = v->name();
    v->ReplaceAllUsesWith(c->result(0));
    c->SetOperand(0, v);
    if (!name.empty()) {
      c->result(0)->set_name(name);
      v->set_name(absl::StrCat(name, suffix));
    }
    return absl::OkStatus();
  }

  // The op's result is a partial sum when its operands are: every operand it is linear in is a
  // partial sum and the rest (gates, weights) are whole.
  static bool LinearInPartials(const Op& op, const absl::flat_hash_set<Value*>& partial) {
    auto p = [&](unsigned i) { return partial.contains(op.operand(i)); };
    switch (op.kind()) {
      case OpKind::kAdd:
        return p(0) && p(1);
      case OpKind::kGatedAdd:
        return p(0) && p(1) && !p(2);
      case OpKind::kScale:
      case OpKind::kMulWeight:
      case OpKind::kReshape:
        return p(0);
      default:
        return false;
    }
  }

  Option<int64_t> tp_{this, "tp", "tensor-parallel ranks (1: no change)", 1, 1, 64};
  Option<std::string> experts_mode_{this, "experts",
                                    "routed experts: auto (the cost rule), tensor (within each expert) or expert "
                                    "(across the experts)",
                                    "auto"};
  Statistic regions_{this, "regions", "column / row regions cut"};
  Statistic experts_{this, "experts", "routed expert ops cut within each expert (tp_mode = tensor)"};
  Statistic experts_across_{this, "experts-across", "routed expert ops cut across the experts (tp_mode = expert)"};
  Statistic heads_{this, "heads", "vocabulary heads cut by rows (all_gather)"};
  Statistic whole_heads_{this, "whole-heads", "heads left whole (tied to the embedding or rows not dividing)"};
  Statistic kept_{this, "kept-whole", "products or expert ops left whole (tp_whole says why)"};
  Statistic all_reduces_{this, "all-reduces", "all_reduce ops inserted"};
  Statistic gathers_{this, "all-gathers", "all_gather ops inserted"};

  int64_t tp_n_ = 1;
  std::vector<std::pair<Value*, int>> work_;
  std::map<Value*, Cut> cut_;
  absl::flat_hash_set<Op*> done_;
  std::vector<Value*> partial_;
  std::vector<Value*> gathered_;
  std::vector<std::string> reasons_;
};

}  // namespace

std::unique_ptr<Pass> CreateShardTensorParallelPass() { return std::make_unique<ShardTensorParallelPass>(); }

}  // namespace memra::passes
