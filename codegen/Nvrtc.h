// NVRTC, loaded at run time (dlopen of libnvrtc.so.13), so that binaries start and run their
// CPU paths on machines without the CUDA toolkit. Compiles CUDA C++ source to a cubin for one
// architecture; needs no GPU.
//
//   MEMRA_ASSIGN_OR_RETURN(const Nvrtc* nvrtc, Nvrtc::Load());
//   MEMRA_ASSIGN_OR_RETURN(auto cubin, nvrtc->CompileToCubin(src, "norm.cu", {"-arch=sm_90"}, {}));
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::codegen {

class Nvrtc {
 public:
  // Loads the library once per process (thread-safe). `path` empty: the default search (the
  // loader path, then the CUDA toolkit folder found at configure time, then /usr/local/cuda).
  // Error: "NVRTC not found (tried ...)".
  static absl::StatusOr<const Nvrtc*> Load(const std::string& path = "");

  // "13.0"
  std::string VersionString() const;
  int major() const { return major_; }
  int minor() const { return minor_; }
  // Where the library was loaded from.
  const std::string& library() const { return library_; }

  // Compiles `source` (named `name` in diagnostics) with `options`; `headers` are (include name,
  // contents) pairs the source may #include. Returns the cubin. Errors carry the compile log.
  absl::StatusOr<std::vector<uint8_t>> CompileToCubin(
      absl::string_view source, const std::string& name, const std::vector<std::string>& options,
      const std::vector<std::pair<std::string, std::string>>& headers) const;

  struct Api;  // the entry-point table (Nvrtc.cc)

 private:
  Nvrtc() = default;
  const Api* api_ = nullptr;
  int major_ = 0, minor_ = 0;
  std::string library_;
};

// Candidate locations of a CUDA library `soname` (e.g. "libnvrtc.so.13"): the plain soname
// (loader path), the toolkit folder found at configure time, /usr/local/cuda/{lib64,lib},
// and the pip `nvidia-*` wheels' folders of the system python. Used by the runtime's loaders.
std::vector<std::string> CudaLibraryCandidates(const std::string& soname, const std::string& wheel_subdir);

}  // namespace memra::codegen
