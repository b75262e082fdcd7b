#include "passes/PassRegistry.h"

#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace memra::passes {
namespace {

// Function-local, so registration from other libraries' static initializers is order-safe.
struct BackendFactories {
  std::mutex mu;
  absl::flat_hash_map<std::string, PassFactory> factories;
};
BackendFactories& Backends() {
  static BackendFactories* b = new BackendFactories();
  return *b;
}

// Stands in for a backend pass whose library did not register it.
class UnregisteredBackendPass : public Pass {
 public:
  UnregisteredBackendPass(std::string name, std::string library)
      : name_(std::move(name)), library_(std::move(library)) {}
  absl::string_view name() const override { return name_; }
  absl::string_view description() const override { return "backend pass (not registered in this binary)"; }
  absl::StatusOr<bool> Run(ir::Module&) override {
    return absl::FailedPreconditionError(
        absl::StrCat("pass '", name_, "' is implemented in ", library_, ", which did not register it in this binary"));
  }

 private:
  std::string name_, library_;
};

std::unique_ptr<Pass> CreateBackendPass(absl::string_view name, absl::string_view library) {
  PassFactory f = nullptr;
  {
    BackendFactories& b = Backends();
    std::lock_guard<std::mutex> lock(b.mu);
    if (auto it = b.factories.find(name); it != b.factories.end()) f = it->second;
  }
  if (f != nullptr) return f();
  return std::make_unique<UnregisteredBackendPass>(std::string(name), std::string(library));
}

}  // namespace

void RegisterBackendPass(absl::string_view name, PassFactory factory) {
  BackendFactories& b = Backends();
  std::lock_guard<std::mutex> lock(b.mu);
  b.factories[std::string(name)] = factory;
}

#define MEMRA_PASS(id, pname)
#define MEMRA_BACKEND_PASS(id, pname, library) \
  std::unique_ptr<Pass> Create##id##Pass() { return CreateBackendPass(pname, library); }
#include "passes/Passes.def"
#undef MEMRA_BACKEND_PASS
#undef MEMRA_PASS

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
