#include "ir/Value.h"

#include "ir/Op.h"

namespace memra::ir {

void Value::ReplaceAllUsesWith(Value* other) {
  if (other == this) return;
  // SetOperand edits uses_; work on a copy.
  llvm::SmallVector<Use, 4> uses(uses_.begin(), uses_.end());
  for (const Use& u : uses) u.user->SetOperand(u.operand_index, other);
}

void Value::RemoveUse(Op* user, unsigned index) {
  for (size_t i = 0; i < uses_.size(); ++i) {
    if (uses_[i].user == user && uses_[i].operand_index == index) {
      uses_.erase(uses_.begin() + i);
      return;
    }
  }
}

absl::string_view StateKindName(StateKind k) {
  switch (k) {
    case StateKind::kKv:
      return "kv";
    case StateKind::kConv:
      return "conv";
    case StateKind::kDelta:
      return "delta";
    case StateKind::kPosition:
      return "position";
    case StateKind::kBlocks:
      return "blocks";
  }
  return "?";
}

std::optional<StateKind> ParseStateKind(absl::string_view s) {
  for (StateKind k : {StateKind::kKv, StateKind::kConv, StateKind::kDelta, StateKind::kPosition, StateKind::kBlocks})
    if (StateKindName(k) == s) return k;
  return std::nullopt;
}

}  // namespace memra::ir
