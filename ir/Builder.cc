#include "ir/Builder.h"

#include "absl/strings/str_cat.h"

namespace memra::ir {

OpBuilder::OpBuilder(Function* f) { SetInsertionPointToEnd(f->body()); }
OpBuilder::OpBuilder(Block* block, Block::iterator pos) : block_(block), pos_(pos) {}

void OpBuilder::SetInsertionPointToEnd(Block* block) {
  block_ = block;
  pos_ = block->end();
}

void OpBuilder::SetInsertionPoint(Op* before) {
  block_ = before->parent_block();
  pos_ = Block::iterator(*before);
}

void OpBuilder::SetInsertionPointAfter(Op* op) {
  block_ = op->parent_block();
  pos_ = std::next(Block::iterator(*op));
}

absl::StatusOr<Op*> OpBuilder::Create(OpKind kind, llvm::ArrayRef<Value*> operands, AttrDict attrs,
                                      llvm::ArrayRef<TensorType> explicit_types) {
  auto fail = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("building '", Mnemonic(kind), "': ", s.message()));
  };
  if (absl::Status s = CheckSignature(kind, operands, attrs); !s.ok()) return fail(s);
  auto types = InferResultTypes(kind, operands, attrs, explicit_types);
  if (!types.ok()) return fail(types.status());
  std::unique_ptr<Op> op = Op::Create(kind, operands, *types, std::move(attrs));
  return block_->Insert(pos_, std::move(op));
}

Value* OpBuilder::Poison() {
  poison_.push_back(std::make_unique<Value>(Value::Kind::kArgument, TensorType(), "<poison>"));
  return poison_.back().get();
}

bool OpBuilder::IsPoison(Value* v) const {
  for (const auto& p : poison_)
    if (p.get() == v) return true;
  return false;
}

llvm::SmallVector<Value*, 2> OpBuilder::Build(OpKind kind, llvm::ArrayRef<Value*> operands, AttrDict attrs,
                                              llvm::ArrayRef<TensorType> explicit_types) {
  const OpInfo& info = InfoOf(kind);
  auto poison = [&](size_t n) {
    last_op_ = nullptr;
    llvm::SmallVector<Value*, 2> out;
    for (size_t i = 0; i < std::max<size_t>(n, 1); ++i) out.push_back(Poison());
    return out;
  };
  size_t expected_results = info.variadic_results ? 1 : info.results.size();
  if (kind == OpKind::kSplit) expected_results = attrs.GetI64Array("sizes").value_or(std::vector<int64_t>{1}).size();
  if (kind == OpKind::kMatMulGroup) expected_results = operands.size() > 1 ? operands.size() - 1 : 1;
  for (Value* v : operands)
    if (IsPoison(v)) return poison(expected_results);
  if (!status_.ok()) return poison(expected_results);
  absl::StatusOr<Op*> op = Create(kind, operands, std::move(attrs), explicit_types);
  if (!op.ok()) {
    status_ = op.status();
    return poison(expected_results);
  }
  last_op_ = *op;
  return (*op)->results();
}

Value* OpBuilder::Build1(OpKind kind, llvm::ArrayRef<Value*> operands, AttrDict attrs,
                         llvm::ArrayRef<TensorType> explicit_types) {
  auto r = Build(kind, operands, std::move(attrs), explicit_types);
  return r.empty() ? Poison() : r[0];
}

llvm::SmallVector<Value*, 2> OpBuilder::MatMulGroup(Value* x, llvm::ArrayRef<Value*> ws) {
  llvm::SmallVector<Value*, 4> operands{x};
  operands.append(ws.begin(), ws.end());
  return Build(OpKind::kMatMulGroup, operands);
}

std::pair<Value*, Value*> OpBuilder::QGateSplit(Value* qg, int64_t n_head, int64_t head_dim) {
  auto r = Build(OpKind::kQGateSplit, {qg}, {{"n_head", n_head}, {"head_dim", head_dim}});
  return {r[0], r.size() > 1 ? r[1] : r[0]};
}

std::pair<Value*, Value*> OpBuilder::DeltaNetGates(Value* b, Value* a, Value* dt_bias, Value* ssm_a) {
  auto r = Build(OpKind::kDeltaNetGates, {b, a, dt_bias, ssm_a});
  return {r[0], r.size() > 1 ? r[1] : r[0]};
}

std::pair<Value*, Value*> OpBuilder::AddRmsNorm(Value* a, Value* b, Value* w, double eps) {
  auto r = Build(OpKind::kAddRmsNorm, {a, b, w}, {{"eps", eps}});
  return {r[0], r.size() > 1 ? r[1] : r[0]};
}

std::pair<Value*, Value*> OpBuilder::TopK(Value* x, int64_t k) {
  auto r = Build(OpKind::kTopK, {x}, {{"k", k}});
  return {r[0], r.size() > 1 ? r[1] : r[0]};
}

std::pair<Value*, Value*> OpBuilder::MoeRoute(Value* logits, int64_t k, Value* expert_scale) {
  llvm::SmallVector<Value*, 2> operands{logits};
  if (expert_scale != nullptr) operands.push_back(expert_scale);
  auto r = Build(OpKind::kMoeRoute, operands, {{"k", k}});
  return {r[0], r.size() > 1 ? r[1] : r[0]};
}

std::pair<Value*, Value*> OpBuilder::MoeRouteSigmoid(Value* logits, int64_t k, Value* bias, bool norm, double scale) {
  llvm::SmallVector<Value*, 2> operands{logits};
  if (bias != nullptr) operands.push_back(bias);
  AttrDict a;
  a.Set("k", k);
  if (norm) a.Set("norm", int64_t{1});
  if (scale != 0 && scale != 1) a.Set("scale", scale);
  auto r = Build(OpKind::kMoeRouteSigmoid, operands, std::move(a));
  return {r[0], r.size() > 1 ? r[1] : r[0]};
}

Value* OpBuilder::MoeExperts(Value* x, Value* weights, Value* ids, Value* w_down, llvm::ArrayRef<Value*> w_gate_up,
                             const std::string& activation, double clamp) {
  llvm::SmallVector<Value*, 6> operands{x, weights, ids, w_down};
  operands.append(w_gate_up.begin(), w_gate_up.end());
  AttrDict a;
  if (activation != "silu") a.Set("activation", activation);
  if (clamp > 0) a.Set("clamp", clamp);
  return Build1(OpKind::kMoeExperts, operands, std::move(a));
}

Value* OpBuilder::Reshape(Value* x, Shape shape) {
  if (IsPoison(x)) return Poison();
  return Build1(OpKind::kReshape, {x}, {}, {TensorType(x->dtype(), std::move(shape))});
}

Op* OpBuilder::AdvancePositions(Value* counter, Value* like) {
  Build(OpKind::kAdvancePositions, {counter, like});
  return last_op_;
}

Op* OpBuilder::KvAppend(Value* k, Value* v, Value* k_cache, Value* v_cache, Value* pos, int64_t ring) {
  AttrDict a;
  if (ring > 0) a.Set("ring", ring);
  Build(OpKind::kKvAppend, {k, v, k_cache, v_cache, pos}, std::move(a));
  return last_op_;
}

Op* OpBuilder::SeqAdvancePositions(Value* counter, Value* seq_slot, Value* seq_start) {
  Build(OpKind::kSeqAdvancePositions, {counter, seq_slot, seq_start});
  return last_op_;
}

Op* OpBuilder::PagedKvAppend(Value* k, Value* v, Value* k_cache, Value* v_cache, Value* blocks, Value* pos,
                             Value* slot) {
  Build(OpKind::kPagedKvAppend, {k, v, k_cache, v_cache, blocks, pos, slot});
  return last_op_;
}

Op* OpBuilder::Return(llvm::ArrayRef<Value*> values) {
  Build(OpKind::kReturn, values);
  return last_op_;
}

Op* OpBuilder::Segment(bool capturable, std::optional<int64_t> bucket) {
  AttrDict attrs{{"capturable", static_cast<int64_t>(capturable)}};
  if (bucket) attrs.Set("bucket", *bucket);
  Build(OpKind::kSegment, {}, std::move(attrs));
  return last_op_;
}

}  // namespace memra::ir
