#include "passes/PassRegistry.h"

namespace memra::passes {

std::unique_ptr<Pass> CreatePass(absl::string_view name) {
#define MEMRA_PASS(id, pname) \
  if (name == pname) return Create##id##Pass();
#include "passes/Passes.def"
#undef MEMRA_PASS
  return nullptr;
}

std::vector<std::string> RegisteredPassNames() {
  return {
#define MEMRA_PASS(id, pname) pname,
#include "passes/Passes.def"
#undef MEMRA_PASS
  };
}

}  // namespace memra::passes
