// Rewrite patterns and their driver, a tiny version of MLIR's RewritePattern, PatternRewriter and
// greedy driver, for the fusion passes (which all match a root op, check the candidate, build
// the fused op, replace uses and erase the old ops):
//
//   * a pattern has a root op kind, a Match that returns a match (a struct of its own holding
//     the matched ops), NoMatch() (the root is not this pattern's shape: not counted) or
//     Skip(reason) (a candidate left alone: `reason` is a Statistic of the pass, so
//     --pass-statistics prints how often each reason applied), and a Rewrite that builds the
//     replacement through the PatternRewriter. The base declares the rewrite statistic first.
//   * ApplyPatterns sweeps a function once; PatternPass is the FunctionPass that applies its
//     patterns to every function.
//
//   struct SwigluMatch { ir::Op *swiglu, *gate, *up; };
//   class SwigluPattern : public RewritePattern<SwigluMatch> {
//    public:
//     explicit SwigluPattern(Pass* p) : RewritePattern(p, ir::OpKind::kSwiglu, "fused", "swiglus fused") {}
//     MatchResult<SwigluMatch> Match(ir::Op& sw, const PatternRewriter& rw) override {
//       ir::Op* g = DefOf(sw.operand(0), ir::OpKind::kMatMul);
//       ir::Op* u = DefOf(sw.operand(1), ir::OpKind::kMatMul);
//       if (g == nullptr || u == nullptr) return NoMatch();
//       if (!HasSingleUse(g->result(0))) return Skip(skipped_uses_);
//       return SwigluMatch{&sw, g, u};
//     }
//     absl::Status Rewrite(const SwigluMatch& m, PatternRewriter& rw) override {
//       MEMRA_ASSIGN_OR_RETURN(ir::Op* f, rw.Create(m.swiglu, ir::OpKind::kMatMulSwiglu,
//                                                   {m.gate->operand(0), m.gate->operand(1), m.up->operand(1)}));
//       rw.Replace(m.swiglu->result(0), f->result(0));
//       for (ir::Op* op : {m.swiglu, m.gate, m.up}) rw.Erase(op);
//       return absl::OkStatus();
//     }
//    private:
//     Statistic skipped_uses_{pass(), "skipped-uses", "swiglus whose products have other users"};
//   };
//   class FuseSwigluPass : public PatternPass {
//    public:
//     FuseSwigluPass() { AddPattern<SwigluPattern>(); }
//     ...name(), description()
//   };
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/Function.h"
#include "llvm/ADT/ArrayRef.h"
#include "passes/FunctionPass.h"
#include "passes/Pass.h"

namespace memra::passes {

class RewritePatternBase;

// One sweep over the ops `f` had when it started, in program order, skipping the ones erased
// meanwhile: at each op, the patterns of its kind are tried in order until one rewrites. No
// fixed point: the fusion patterns never create what they match, and a second sweep would
// count every skip twice. True if anything was rewritten.
absl::StatusOr<bool> ApplyPatterns(ir::Function& f, llvm::ArrayRef<RewritePatternBase*> patterns);

// What a pattern may do to the function it runs on. Rewrites erase through it (never
// Op::Erase), so the driver never visits an erased op.
class PatternRewriter {
 public:
  explicit PatternRewriter(ir::Function& f);

  ir::Function& function() const { return f_; }
  // Program-order index, when the driver started, of a live op that existed then (segment
  // bodies included); -1 for ops created since (so "is that use earlier" checks stay
  // conservative).
  int64_t Order(const ir::Op* op) const;
  // The live ops of `kind` that existed when the driver started and come after `op` (one of
  // them, e.g. a root), in program order.
  std::vector<ir::Op*> LiveOpsAfter(const ir::Op& op, ir::OpKind kind) const;

  // An op of `kind` inserted right before `before` (OpBuilder::Create: types inferred, the
  // signature checked).
  absl::StatusOr<ir::Op*> Create(ir::Op* before, ir::OpKind kind, llvm::ArrayRef<ir::Value*> operands,
                                 ir::AttrDict attrs = {});
  // Every use of `from` now uses `to`; `to` takes `from`'s name (PassUtil's ReplaceValue).
  void Replace(ir::Value* from, ir::Value* to);
  // Erases `op`, whose results must be unused by then.
  void Erase(ir::Op* op);
  // Every result of `op` replaced by `with`'s result of the same index (Replace), then `op` erased:
  // a fused op taking the place of the op whose results it computes.
  void ReplaceOp(ir::Op* op, ir::Op* with);

 private:
  friend absl::StatusOr<bool> ApplyPatterns(ir::Function& f, llvm::ArrayRef<RewritePatternBase*> patterns);

  ir::Function& f_;
  std::vector<ir::Op*> ops_;                           // program order at the start
  absl::flat_hash_map<const ir::Op*, int64_t> order_;  // the live ones, index into ops_
};

// Match's answers besides a match: NoMatch() when the root is not the pattern's shape (most ops
// of the root kind; not counted), Skip(reason) when a candidate is left alone (counted in
// `reason`, a statistic whose description says why).
struct NoMatch {};
class Skip {
 public:
  explicit Skip(Statistic& reason) : reason_(&reason) {}
  Statistic& reason() const { return *reason_; }

 private:
  Statistic* reason_;
};

template <typename M>
class MatchResult {
 public:
  MatchResult(M match) : v_(std::move(match)) {}
  MatchResult(NoMatch) : v_(NoMatch{}) {}
  MatchResult(Skip skip) : v_(skip) {}
  const M* match() const { return std::get_if<M>(&v_); }
  Statistic* skip_reason() const {
    const Skip* s = std::get_if<Skip>(&v_);
    return s ? &s->reason() : nullptr;
  }

 private:
  std::variant<NoMatch, Skip, M> v_;
};

// The driver's view of a pattern (RewritePattern<M> below is what patterns derive from).
class RewritePatternBase {
 public:
  // Options and statistics of the pattern register with `pass`; the rewrite statistic comes
  // first.
  RewritePatternBase(Pass* pass, ir::OpKind root, absl::string_view rewrites_name,
                     absl::string_view rewrites_description)
      : pass_(pass), root_(root), rewrites_(pass, rewrites_name, rewrites_description) {}
  virtual ~RewritePatternBase() = default;
  RewritePatternBase(const RewritePatternBase&) = delete;
  RewritePatternBase& operator=(const RewritePatternBase&) = delete;

  ir::OpKind root() const { return root_; }
  // Matches at `root` and rewrites on a match, counting the rewrite or the skip; true if it
  // rewrote.
  virtual absl::StatusOr<bool> Apply(ir::Op& root, PatternRewriter& rw) = 0;

 protected:
  Pass* pass() const { return pass_; }
  // A Rewrite error with where it happened (the root as it was before the rewrite).
  static absl::Status RewriteError(const absl::Status& s, const PatternRewriter& rw, absl::string_view root) {
    return absl::Status(s.code(), absl::StrCat("@", rw.function().name(), ": rewriting ", root, ": ", s.message()));
  }

 private:
  Pass* pass_;
  ir::OpKind root_;

 protected:
  Statistic rewrites_;
};

template <typename M>
class RewritePattern : public RewritePatternBase {
 public:
  using RewritePatternBase::RewritePatternBase;

  // Looks at `root` (of the root kind); must not change the IR.
  virtual MatchResult<M> Match(ir::Op& root, const PatternRewriter& rw) = 0;
  // Replaces what Match matched.
  virtual absl::Status Rewrite(const M& match, PatternRewriter& rw) = 0;

  absl::StatusOr<bool> Apply(ir::Op& root, PatternRewriter& rw) final {
    MatchResult<M> r = Match(root, rw);
    if (Statistic* why = r.skip_reason()) ++*why;
    if (r.match() == nullptr) return false;
    const std::string at = root.Summary();  // the rewrite may erase the root
    if (absl::Status s = Rewrite(*r.match(), rw); !s.ok()) return RewriteError(s, rw, at);
    ++rewrites_;
    return true;
  }
};

// A function pass made of patterns: RunOnFunction is ApplyPatterns with them.
class PatternPass : public FunctionPass {
 protected:
  // Adds a pattern built as P(this, args...); patterns are tried in the order added, and their
  // statistics print in that order.
  template <typename P, typename... Args>
  P& AddPattern(Args&&... args) {
    auto p = std::make_unique<P>(this, std::forward<Args>(args)...);
    P& ref = *p;
    patterns_.push_back(p.get());
    owned_.push_back(std::move(p));
    return ref;
  }

  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override { return ApplyPatterns(f, patterns_); }

 private:
  std::vector<std::unique_ptr<RewritePatternBase>> owned_;
  std::vector<RewritePatternBase*> patterns_;
};

}  // namespace memra::passes
