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

// A fresh instance of the pass called `name`, or nullptr.
std::unique_ptr<Pass> CreatePass(absl::string_view name);
std::vector<std::string> RegisteredPassNames();

}  // namespace memra::passes
