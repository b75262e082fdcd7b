// The module: weights (references into the GGUF), state buffers, functions, and free-form
// module attributes (architecture, hyperparameters the lowering wants to record).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ir/Function.h"

namespace memra::ir {

class Module {
 public:
  Module() = default;
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Weights. `shape` is in IR order (ggml ne reversed); AddWeightNe takes ggml ne order.
  // Adding a name twice returns nullptr.
  Weight* AddWeight(absl::string_view name, DType dtype, Shape shape);
  Weight* AddWeightNe(absl::string_view name, DType dtype, llvm::ArrayRef<int64_t> ne);
  Weight* weight(absl::string_view name) const;
  const std::vector<std::unique_ptr<Weight>>& weights() const { return weights_; }
  // Removes a weight without uses; false if it has uses or does not exist.
  bool EraseWeight(absl::string_view name);

  StateVar* AddState(StateKind kind, absl::string_view name, TensorType type, AttrDict attrs = {});
  StateVar* state(absl::string_view name) const;
  const std::vector<std::unique_ptr<StateVar>>& states() const { return states_; }

  // A weight or state by name (they share one namespace), or nullptr.
  Value* LookupGlobal(absl::string_view name) const;

  Function* AddFunction(absl::string_view name);  // nullptr if the name exists
  Function* function(absl::string_view name) const;
  const std::vector<std::unique_ptr<Function>>& functions() const { return functions_; }
  bool EraseFunction(absl::string_view name);

  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

  // Deep copy (through the textual form's data structures, not text).
  std::unique_ptr<Module> Clone() const;

 private:
  AttrDict attrs_;
  // Declared before functions_ so functions (the users) are destroyed first.
  std::vector<std::unique_ptr<Weight>> weights_;
  std::vector<std::unique_ptr<StateVar>> states_;
  absl::flat_hash_map<std::string, Value*> globals_;
  std::vector<std::unique_ptr<Function>> functions_;
};

}  // namespace memra::ir
