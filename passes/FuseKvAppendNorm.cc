// fuse-kv-append-norm: the weightless RMSNorm of the values an attention layer appends to its
// cache (Gemma 4's V norm) moves into the append,
//
//   %vn = rms_norm(%v) {eps}                         ->   kv_append(%k, %v, @kc, @vc, %pos)
//   kv_append(%k, %vn, @kc, @vc, %pos)                          {v_norm_eps = eps}
//
// (ir/Ops.def kv_append v_norm_eps: each value head row normalized as that rms_norm computes it,
// then stored), so a decode step has one launch fewer per layer. Only a norm without a weight
// whose one user is the append, over the value rows themselves (rank 3, the append's k shape).
// The paged append of the batched engine is not matched. On the CPU executor the append runs the
// rms_norm kernel first (bit-identical).
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct AppendNormMatch {
  Op* append;
  Op* norm;
};

class KvAppendNormPattern : public RewritePattern<AppendNormMatch> {
 public:
  explicit KvAppendNormPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kKvAppend, "fused",
                       "weightless rms_norms of appended values moved into kv_append") {}

  MatchResult<AppendNormMatch> Match(Op& append, const PatternRewriter&) override {
    if (append.num_operands() != 5 || append.attrs().Has("v_norm_eps")) return NoMatch();
    Op* norm = DefOf(append.operand(1), OpKind::kRmsNorm);
    if (norm == nullptr) return NoMatch();
    if (norm->num_operands() != 1) return Skip(skipped_weighted_);
    if (!HasSingleUse(norm->result(0))) return Skip(skipped_uses_);
    if (norm->operand(0)->rank() != 3 || norm->operand(0)->dtype() != ir::DType::kF32) return Skip(skipped_form_);
    return AppendNormMatch{&append, norm};
  }

  absl::Status Rewrite(const AppendNormMatch& m, PatternRewriter& rw) override {
    const Op& a = *m.append;
    ir::AttrDict attrs = a.attrs();
    attrs.Set("v_norm_eps", m.norm->attrs().F64Or("eps", 0.0));
    MEMRA_ASSIGN_OR_RETURN(
        Op * fused,
        rw.Create(m.append, OpKind::kKvAppend,
                  {a.operand(0), m.norm->operand(0), a.operand(2), a.operand(3), a.operand(4)}, std::move(attrs)));
    (void)fused;
    rw.Erase(m.append);
    rw.Erase(m.norm);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_weighted_{pass(), "skipped-weighted", "value norms with a weight (not Gemma's V norm)"};
  Statistic skipped_uses_{pass(), "skipped-uses", "value norms with another user"};
  Statistic skipped_form_{pass(), "skipped-form", "value norms not over [T, H, D] f32 rows"};
};

class FuseKvAppendNormPass : public PatternPass {
 public:
  FuseKvAppendNormPass() { AddPattern<KvAppendNormPattern>(); }
  absl::string_view name() const override { return "fuse-kv-append-norm"; }
  absl::string_view description() const override {
    return "Moves the weightless rms_norm of appended values into kv_append (v_norm_eps)";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseKvAppendNormPass() { return std::make_unique<FuseKvAppendNormPass>(); }

}  // namespace memra::passes
