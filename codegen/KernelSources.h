// The CUDA C++ kernel sources of kernels/cuda/ (*.cu, and *.cuh headers they include), embedded
// into the binary at build time (codegen/CMakeLists.txt turns them into string literals), so a
// memra binary compiles its kernels with NVRTC without the source tree.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::codegen {

struct EmbeddedSource {
  const char* name;  // file name, e.g. "Norm.cu", "Common.cuh"
  const char* text;
};

// Every embedded file, sorted by name.
std::vector<EmbeddedSource> EmbeddedKernelSources();
// The text of `name`; NotFound naming the known files otherwise.
absl::StatusOr<absl::string_view> KernelSource(absl::string_view name);
// The headers as (include name, text) pairs for NVRTC: *.cuh and the parameter structs shared
// with the host (*Params.h, KernelParams.h).
std::vector<std::pair<std::string, std::string>> KernelHeaders();

}  // namespace memra::codegen
