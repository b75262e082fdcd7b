// A function: named, with typed arguments, result types and a body block of ops ending in
// `return`. Functions of a module are e.g. @prefill (T tokens) and @decode (T = 1).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/Op.h"

namespace memra::ir {

class Module;

class Function {
 public:
  Function(Module* module, std::string name);
  ~Function();
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;

  const std::string& name() const { return name_; }
  void set_name(absl::string_view n) { name_ = std::string(n); }
  Module* module() const { return module_; }

  Value* AddArgument(absl::string_view name, TensorType type);
  unsigned num_arguments() const { return args_.size(); }
  Value* argument(unsigned i) const { return args_[i].get(); }
  llvm::SmallVector<Value*, 4> arguments() const;

  const std::vector<TensorType>& result_types() const { return result_types_; }
  void set_result_types(std::vector<TensorType> types) { result_types_ = std::move(types); }

  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

  Block* body() { return &body_; }
  const Block* body() const { return &body_; }
  // The final `return` op, or nullptr.
  Op* ReturnOp() const;
  // All ops in program order (descending into segments), a snapshot.
  std::vector<Op*> Ops() const;
  size_t NumOps() const { return Ops().size(); }

  // Replaces symbols in every argument, result and value type (bucket specialization).
  void SubstituteSymbols(const SymbolBindings& bindings);
  // Deep copy named `new_name` into `dest` (same module or another with the same globals by
  // name). Returns an error if a global is missing in `dest`.
  Function* CloneInto(Module* dest, absl::string_view new_name) const;

 private:
  Module* module_;
  std::string name_;
  std::vector<std::unique_ptr<Value>> args_;
  std::vector<TensorType> result_types_;
  AttrDict attrs_;
  Block body_;
};

}  // namespace memra::ir
