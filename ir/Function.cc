#include "ir/Function.h"

#include "absl/container/flat_hash_map.h"
#include "ir/Module.h"

namespace memra::ir {

Function::Function(Module* module, std::string name) : module_(module), name_(std::move(name)), body_(this, nullptr) {}

Function::~Function() = default;

Value* Function::AddArgument(absl::string_view name, TensorType type) {
  auto v = std::make_unique<Value>(Value::Kind::kArgument, std::move(type), std::string(name));
  v->SetArgOwner(this, args_.size());
  args_.push_back(std::move(v));
  return args_.back().get();
}

llvm::SmallVector<Value*, 4> Function::arguments() const {
  llvm::SmallVector<Value*, 4> out;
  for (const auto& a : args_) out.push_back(a.get());
  return out;
}

Op* Function::ReturnOp() const {
  if (body_.empty()) return nullptr;
  const Op& last = body_.back();
  return last.is(OpKind::kReturn) ? const_cast<Op*>(&last) : nullptr;
}

std::vector<Op*> Function::Ops() const {
  std::vector<Op*> out;
  body_.CollectOps(out);
  return out;
}

void Function::SubstituteSymbols(const SymbolBindings& bindings) {
  for (auto& a : args_) a->set_type({a->dtype(), a->shape().Substitute(bindings)});
  for (auto& t : result_types_) t.shape = t.shape.Substitute(bindings);
  for (Op* op : Ops())
    for (Value* r : op->results()) r->set_type({r->dtype(), r->shape().Substitute(bindings)});
}

namespace {

void CloneBlock(const Block& src, Block* dst, absl::flat_hash_map<const Value*, Value*>& map, Module* dest_module) {
  for (const Op& op : src) {
    llvm::SmallVector<Value*, 4> operands;
    for (Value* v : op.operands()) {
      auto it = map.find(v);
      if (it != map.end()) {
        operands.push_back(it->second);
      } else if (v && v->is_global()) {
        Value* g = dest_module->LookupGlobal(v->name());
        operands.push_back(g ? g : v);
      } else {
        operands.push_back(v);
      }
    }
    llvm::SmallVector<TensorType, 2> types;
    for (Value* r : op.results()) types.push_back(r->type());
    std::unique_ptr<Op> copy = Op::Create(op.kind(), operands, types, op.attrs());
    copy->set_loc(op.loc());
    for (unsigned i = 0; i < op.num_results(); ++i) {
      copy->result(i)->set_name(op.result(i)->name());
      map[op.result(i)] = copy->result(i);
    }
    Op* placed = dst->PushBack(std::move(copy));
    if (op.body()) CloneBlock(*op.body(), placed->body(), map, dest_module);
  }
}

}  // namespace

Function* Function::CloneInto(Module* dest, absl::string_view new_name) const {
  Function* f = dest->AddFunction(new_name);
  absl::flat_hash_map<const Value*, Value*> map;
  for (const auto& a : args_) map[a.get()] = f->AddArgument(a->name(), a->type());
  f->set_result_types(result_types_);
  f->attrs() = attrs_;
  CloneBlock(body_, f->body(), map, dest);
  return f;
}

}  // namespace memra::ir
