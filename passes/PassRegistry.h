// Creating passes by name (all passes are listed in passes/Passes.def).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/Pass.h"

namespace memra::passes {

#define MEMRA_PASS(id, name) std::unique_ptr<Pass> Create##id##Pass();
#include "passes/Passes.def"
#undef MEMRA_PASS

// Backend passes (MEMRA_BACKEND_PASS in Passes.def) are implemented in a library above
// memra_passes; that library registers the factory here, e.g. codegen::RegisterCodegenPasses()
// (also run by a static initializer in codegen/SelectKernelsPass.cc). Until then
// Create<Id>Pass() returns a pass that fails when run, naming the library to link.
using PassFactory = std::unique_ptr<Pass> (*)();
void RegisterBackendPass(absl::string_view name, PassFactory factory);

// A fresh instance of the pass called `name`, or nullptr.
std::unique_ptr<Pass> CreatePass(absl::string_view name);
std::vector<std::string> RegisteredPassNames();

}  // namespace memra::passes
