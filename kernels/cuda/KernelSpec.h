// What a kernel instance is: one kernels/cuda/*.cu file compiled with one set of `-D`
// specialization constants (a module: all its `extern "C"` entries), one entry of it, and its
// launch geometry. Modules are what NVRTC compiles and caches (codegen/KernelCompiler) and what a
// plan's kernel table stores.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::kernels::cuda {

using Defines = std::vector<std::pair<std::string, std::string>>;  // kept sorted by name

struct ModuleSpec {
  std::string file;  // "Norm.cu"
  Defines defines;
  bool sm_90a = false;      // arch-specific target (wgmma, setmaxnreg)
  std::string Key() const;  // "Norm.cu<NORM_BLOCK=256,NORM_COLS=4096>" ("[sm_90a]" after the file)
  bool operator<(const ModuleSpec& o) const { return Key() < o.Key(); }
};

struct KernelSpec {
  ModuleSpec module;
  std::string entry;  // extern "C" kernel name
  std::string ToString() const { return module.Key() + "::" + entry; }
};

// The inverse of ModuleSpec::Key() / KernelSpec::ToString() (the plan's `kernels` attributes).
absl::StatusOr<ModuleSpec> ParseModuleKey(absl::string_view key);
absl::StatusOr<KernelSpec> ParseKernelName(absl::string_view name);

// A define list from name/value pairs (sorted).
Defines MakeDefines(std::vector<std::pair<std::string, std::string>> d);
template <typename T>
std::pair<std::string, std::string> Def(const std::string& name, T value) {
  return {name, std::to_string(value)};
}

// One kernel launch of an op: the instance and its 1-D geometry; `cluster` > 1: thread-block
// clusters of that many blocks along the grid (sm_90; the grid a multiple of it).
struct Launch {
  KernelSpec kernel;
  uint32_t grid = 1;
  uint32_t block = 1;
  uint32_t smem = 0;
  uint32_t cluster = 1;
};

}  // namespace memra::kernels::cuda
