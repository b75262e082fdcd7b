#include "ir/Op.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Function.h"

namespace memra::ir {

std::string Loc::ToString() const {
  if (!known()) return "";
  return absl::StrCat(line, ":", col);
}

std::unique_ptr<Op> Op::Create(OpKind kind, llvm::ArrayRef<Value*> operands, llvm::ArrayRef<TensorType> result_types,
                               AttrDict attrs) {
  std::unique_ptr<Op> op(new Op(kind));
  for (Value* v : operands) op->AppendOperand(v);
  for (unsigned i = 0; i < result_types.size(); ++i) {
    auto v = std::make_unique<Value>(Value::Kind::kResult, result_types[i], "");
    v->SetDef(op.get(), i);
    op->results_.push_back(std::move(v));
  }
  op->attrs_ = std::move(attrs);
  if (op->info().HasFlag(op_flags::kRegion)) op->body();
  return op;
}

Op::~Op() {
  DropAllOperands();
  body_.reset();
  // Users left behind (a precondition violation, or IR torn down in any order) lose the operand
  // instead of pointing at freed memory.
  for (auto& r : results_) {
    llvm::SmallVector<Use, 2> uses(r->uses().begin(), r->uses().end());
    for (const Use& u : uses) u.user->SetOperand(u.operand_index, nullptr);
  }
}

void Op::SetOperand(unsigned i, Value* v) {
  if (operands_[i] == v) return;
  if (operands_[i]) operands_[i]->RemoveUse(this, i);
  operands_[i] = v;
  if (v) v->AddUse(this, i);
}

void Op::SetOperands(llvm::ArrayRef<Value*> values) {
  DropAllOperands();
  for (Value* v : values) AppendOperand(v);
}

void Op::AppendOperand(Value* v) {
  operands_.push_back(v);
  if (v) v->AddUse(this, operands_.size() - 1);
}

void Op::DropAllOperands() {
  for (unsigned i = 0; i < operands_.size(); ++i)
    if (operands_[i]) operands_[i]->RemoveUse(this, i);
  operands_.clear();
}

llvm::SmallVector<Value*, 2> Op::results() const {
  llvm::SmallVector<Value*, 2> out;
  for (const auto& r : results_) out.push_back(r.get());
  return out;
}

bool Op::HasUsedResults() const {
  for (const auto& r : results_)
    if (r->has_uses()) return true;
  return false;
}

Block* Op::body() {
  if (!body_) body_ = std::make_unique<Block>(parent_ ? parent_->function() : nullptr, this);
  return body_.get();
}

Op* Op::parent_op() const { return parent_ ? parent_->parent_op() : nullptr; }
Function* Op::function() const { return parent_ ? parent_->function() : nullptr; }

void Op::Erase() { Remove().reset(); }

std::unique_ptr<Op> Op::Remove() {
  if (parent_) {
    parent_->ops_.remove(*this);
    parent_ = nullptr;
  }
  return std::unique_ptr<Op>(this);
}

void Op::MoveBefore(Op* other) {
  std::unique_ptr<Op> self = Remove();
  other->parent_block()->Insert(Block::iterator(*other), std::move(self));
}

std::string Op::Summary() const {
  auto name = [](const Value* v) -> std::string {
    if (!v) return "<null>";
    return absl::StrCat(v->is_global() ? "@" : "%", v->name().empty() ? "?" : v->name());
  };
  std::string s;
  if (!results_.empty()) {
    s = absl::StrJoin(results_, ", ",
                      [&](std::string* out, const std::unique_ptr<Value>& v) { out->append(name(v.get())); });
    s += " = ";
  }
  absl::StrAppend(&s, mnemonic(), "(",
                  absl::StrJoin(operands_, ", ", [&](std::string* out, const Value* v) { out->append(name(v)); }), ")");
  if (!attrs_.empty()) absl::StrAppend(&s, " ", attrs_.ToString());
  return s;
}

static void DropOperandsRecursively(Block& b) {
  for (Op& op : b) {
    op.DropAllOperands();
    if (op.has_body()) DropOperandsRecursively(*op.body());
  }
}

Block::~Block() {
  DropOperandsRecursively(*this);
  while (!ops_.empty()) {
    Op& op = ops_.back();
    ops_.remove(op);
    op.parent_ = nullptr;
    delete &op;
  }
}

Op* Block::Insert(iterator pos, std::unique_ptr<Op> op) {
  Op* raw = op.release();
  raw->parent_ = this;
  ops_.insert(pos, *raw);
  if (raw->body_) raw->body_->function_ = function();
  return raw;
}

Function* Block::function() const {
  if (function_) return function_;
  if (parent_op_) return parent_op_->function();
  return nullptr;
}

void Block::CollectOps(std::vector<Op*>& out) const {
  for (const Op& op : ops_) {
    out.push_back(const_cast<Op*>(&op));
    if (op.body()) op.body()->CollectOps(out);
  }
}

}  // namespace memra::ir
