#include "codegen/DynamicLibrary.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memra::codegen {

absl::StatusOr<DynamicLibrary> DynamicLibrary::Open(const std::vector<std::string>& candidates, absl::string_view what,
                                                    absl::string_view why) {
  DynamicLibrary lib;
  for (const std::string& c : candidates)
    if ((lib.handle_ = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
      lib.path_ = c;
      return lib;
    }
  return absl::NotFoundError(
      absl::StrCat(what, " not found (tried ", absl::StrJoin(candidates, ", "), ")", why.empty() ? "" : "; ", why));
}

void* DynamicLibrary::Symbol(const char* name) {
  void* p = handle_ != nullptr ? dlsym(handle_, name) : nullptr;
  if (p == nullptr) missing_.push_back(name);
  return p;
}

absl::Status DynamicLibrary::Check() const {
  if (missing_.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(path_, " lacks ", absl::StrJoin(missing_, ", ")));
}

}  // namespace memra::codegen
