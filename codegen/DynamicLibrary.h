// A shared library opened at run time (dlopen) and its entry points: how memra loads NVRTC,
// cuBLASLt and NCCL, so binaries start and run without them and say clearly what is missing.
//
//   MEMRA_ASSIGN_OR_RETURN(DynamicLibrary lib, DynamicLibrary::Open(CudaLibraryCandidates(...), "NCCL", why));
//   lib.Bind(api->AllReduce, "ncclAllReduce");
//   MEMRA_RETURN_IF_ERROR(lib.Check());  // names every entry point the library lacks
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::codegen {

class DynamicLibrary {
 public:
  // The first of `candidates` dlopen accepts (kept open for the process). NotFound naming `what`,
  // every path tried and `why` (what needs it) when none does.
  static absl::StatusOr<DynamicLibrary> Open(const std::vector<std::string>& candidates, absl::string_view what,
                                             absl::string_view why);
  const std::string& path() const { return path_; }
  // fn = the entry point `name` (nullptr when absent, remembered for Check).
  template <typename Fn>
  void Bind(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(Symbol(name));
  }
  // An error naming the library and the entry points it lacks; OK when it has them all.
  absl::Status Check() const;

 private:
  void* Symbol(const char* name);
  void* handle_ = nullptr;
  std::string path_;
  std::vector<std::string> missing_;
};

}  // namespace memra::codegen
