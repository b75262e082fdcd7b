#include "ir/Module.h"

namespace memra::ir {

Module::~Module() {
  // Functions reference globals: drop them first.
  functions_.clear();
}

Weight* Module::AddWeight(absl::string_view name, DType dtype, Shape shape) {
  if (globals_.contains(name)) return nullptr;
  weights_.push_back(std::make_unique<Weight>(std::string(name), TensorType(dtype, std::move(shape))));
  globals_[name] = weights_.back().get();
  return weights_.back().get();
}

Weight* Module::AddWeightNe(absl::string_view name, DType dtype, llvm::ArrayRef<int64_t> ne) {
  Shape s;
  for (auto it = ne.rbegin(); it != ne.rend(); ++it) s.push_back(Dim(*it));
  return AddWeight(name, dtype, std::move(s));
}

Weight* Module::weight(absl::string_view name) const {
  auto it = globals_.find(name);
  if (it == globals_.end()) return nullptr;
  return llvm::dyn_cast<Weight>(it->second);
}

bool Module::EraseWeight(absl::string_view name) {
  for (auto it = weights_.begin(); it != weights_.end(); ++it) {
    if ((*it)->name() != name) continue;
    if ((*it)->has_uses()) return false;
    globals_.erase(name);
    weights_.erase(it);
    return true;
  }
  return false;
}

StateVar* Module::AddState(StateKind kind, absl::string_view name, TensorType type, AttrDict attrs) {
  if (globals_.contains(name)) return nullptr;
  states_.push_back(std::make_unique<StateVar>(kind, std::string(name), std::move(type)));
  states_.back()->attrs() = std::move(attrs);
  globals_[name] = states_.back().get();
  return states_.back().get();
}

StateVar* Module::state(absl::string_view name) const {
  auto it = globals_.find(name);
  if (it == globals_.end()) return nullptr;
  return llvm::dyn_cast<StateVar>(it->second);
}

Value* Module::LookupGlobal(absl::string_view name) const {
  auto it = globals_.find(name);
  return it == globals_.end() ? nullptr : it->second;
}

Function* Module::AddFunction(absl::string_view name) {
  if (function(name)) return nullptr;
  functions_.push_back(std::make_unique<Function>(this, std::string(name)));
  return functions_.back().get();
}

Function* Module::function(absl::string_view name) const {
  for (const auto& f : functions_)
    if (f->name() == name) return f.get();
  return nullptr;
}

bool Module::EraseFunction(absl::string_view name) {
  for (auto it = functions_.begin(); it != functions_.end(); ++it) {
    if ((*it)->name() == name) {
      functions_.erase(it);
      return true;
    }
  }
  return false;
}

std::unique_ptr<Module> Module::Clone() const {
  auto m = std::make_unique<Module>();
  m->attrs_ = attrs_;
  for (const auto& w : weights_) m->AddWeight(w->name(), w->dtype(), w->shape())->attrs() = w->attrs();
  for (const auto& s : states_) m->AddState(s->state_kind(), s->name(), s->type(), s->attrs());
  for (const auto& f : functions_) f->CloneInto(m.get(), f->name());
  return m;
}

}  // namespace memra::ir
