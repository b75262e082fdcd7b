#include "passes/RewritePattern.h"

#include "ir/Builder.h"
#include "passes/PassUtil.h"

namespace memra::passes {

PatternRewriter::PatternRewriter(ir::Function& f) : f_(f), ops_(f.Ops()) {
  for (size_t i = 0; i < ops_.size(); ++i) order_[ops_[i]] = static_cast<int64_t>(i);
}

int64_t PatternRewriter::Order(const ir::Op* op) const {
  auto it = order_.find(op);
  return it == order_.end() ? -1 : it->second;
}

std::vector<ir::Op*> PatternRewriter::LiveOpsAfter(const ir::Op& op, ir::OpKind kind) const {
  std::vector<ir::Op*> out;
  const int64_t at = Order(&op);
  if (at < 0) return out;
  for (size_t i = at + 1; i < ops_.size(); ++i)
    // An erased op's address may be reused by a new op: live means "still at index i".
    if (Order(ops_[i]) == static_cast<int64_t>(i) && ops_[i]->is(kind)) out.push_back(ops_[i]);
  return out;
}

absl::StatusOr<ir::Op*> PatternRewriter::Create(ir::Op* before, ir::OpKind kind, llvm::ArrayRef<ir::Value*> operands,
                                                ir::AttrDict attrs) {
  ir::OpBuilder b(before->parent_block(), ir::Block::iterator(*before));
  return b.Create(kind, operands, std::move(attrs));
}

void PatternRewriter::Replace(ir::Value* from, ir::Value* to) { ReplaceValue(from, to); }

void PatternRewriter::Erase(ir::Op* op) {
  order_.erase(op);
  op->Erase();
}

void PatternRewriter::ReplaceOp(ir::Op* op, ir::Op* with) {
  for (unsigned i = 0; i < op->num_results(); ++i) Replace(op->result(i), with->result(i));
  Erase(op);
}

absl::StatusOr<bool> ApplyPatterns(ir::Function& f, llvm::ArrayRef<RewritePatternBase*> patterns) {
  PatternRewriter rw(f);
  bool changed = false;
  for (size_t i = 0; i < rw.ops_.size(); ++i) {
    ir::Op* op = rw.ops_[i];
    if (rw.Order(op) != static_cast<int64_t>(i)) continue;  // erased (see LiveOpsAfter)
    for (RewritePatternBase* p : patterns) {
      if (!op->is(p->root())) continue;
      absl::StatusOr<bool> rewrote = p->Apply(*op, rw);
      if (!rewrote.ok()) return rewrote.status();
      if (*rewrote) {
        changed = true;
        break;
      }
    }
  }
  return changed;
}

}  // namespace memra::passes
