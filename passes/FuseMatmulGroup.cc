// fuse-matmul-group: matmuls of one input become one matmul_group,
//
//   %q = matmul(%h, @wq)
//   %k = matmul(%h, @wk)            ->    %q, %k, %v = matmul_group(%h, @wq, @wk, @wv)
//   %v = matmul(%h, @wv)
//
// (attention q/k/v, the delta-net qkv/gate/beta/alpha in-projections, FFN gate/up when
// fuse-swiglu did not take them). A backend runs the group as one GEMM over weights concatenated
// once at load, or as one grouped launch; the CPU executor runs the products one by one, exactly
// as the separate matmuls (bit-identical). The group sits where the first matmul was (the input
// dominates it; each product's users follow their matmul). Results keep their names and order.
// Options: max-group (largest group, 0 = no limit); same-dtype (only weights of one dtype per
// group, which a concatenated-weight GEMM needs).
#include <algorithm>
#include <vector>

#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct GroupMatch {
  std::vector<Op*> matmuls;  // program order, the root first
};

// Rooted at the first matmul of a group: the root and the later matmuls of its input that fit
// (same block, max-group, same-dtype). Earlier matmuls of the input were roots already, so they
// are either grouped (erased) or could not group; those that did not fit start a group of
// their own later.
class MatmulGroupPattern : public RewritePattern<GroupMatch> {
 public:
  explicit MatmulGroupPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kMatMul, "groups", "matmul_group ops formed") {}

  MatchResult<GroupMatch> Match(Op& root, const PatternRewriter& rw) override {
    if (*max_group_ == 1) return NoMatch();
    const int64_t at = rw.Order(&root);
    std::vector<Op*> later;
    for (const ir::Use& u : root.operand(0)->uses())
      if (u.operand_index == 0 && u.user->is(OpKind::kMatMul) && rw.Order(u.user) > at) later.push_back(u.user);
    if (later.empty()) return NoMatch();
    std::sort(later.begin(), later.end(), [&](Op* a, Op* b) { return rw.Order(a) < rw.Order(b); });
    GroupMatch m{{&root}};
    bool same_block = false;
    for (Op* mm : later) {
      same_block |= mm->parent_block() == root.parent_block();
      bool fits = mm->parent_block() == root.parent_block() &&
                  (*max_group_ <= 0 || static_cast<int64_t>(m.matmuls.size()) < *max_group_) &&
                  (!*same_dtype_ || mm->operand(1)->dtype() == root.operand(1)->dtype());
      if (fits) m.matmuls.push_back(mm);
    }
    if (m.matmuls.size() < 2) return Skip(same_block ? skipped_dtype_ : skipped_block_);
    return m;
  }

  absl::Status Rewrite(const GroupMatch& m, PatternRewriter& rw) override {
    llvm::SmallVector<ir::Value*, 8> operands{m.matmuls.front()->operand(0)};
    for (Op* mm : m.matmuls) operands.push_back(mm->operand(1));
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.matmuls.front(), OpKind::kMatMulGroup, operands));
    for (size_t i = 0; i < m.matmuls.size(); ++i) {
      rw.Replace(m.matmuls[i]->result(0), fused->result(i));
      rw.Erase(m.matmuls[i]);
    }
    grouped_ += static_cast<int64_t>(m.matmuls.size());
    return absl::OkStatus();
  }

 private:
  Option<int64_t> max_group_{pass(), "max-group", "largest group (0 = no limit)", 0, 0, 1 << 20};
  Option<bool> same_dtype_{pass(), "same-dtype", "group only weights of one dtype", false};
  Statistic grouped_{pass(), "grouped-matmuls", "matmuls folded into groups"};
  Statistic skipped_block_{pass(), "skipped-block",
                           "matmuls whose input's later matmuls are all in another block (segment)"};
  Statistic skipped_dtype_{pass(), "skipped-dtype",
                           "matmuls whose input's later matmuls all have another weight dtype (same-dtype)"};
};

class FuseMatmulGroupPass : public PatternPass {
 public:
  FuseMatmulGroupPass() { AddPattern<MatmulGroupPattern>(); }
  absl::string_view name() const override { return "fuse-matmul-group"; }
  absl::string_view description() const override { return "Groups matmuls sharing one input into matmul_group"; }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseMatmulGroupPass() { return std::make_unique<FuseMatmulGroupPass>(); }

}  // namespace memra::passes
