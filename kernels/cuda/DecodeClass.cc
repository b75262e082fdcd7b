#include "kernels/cuda/DecodeClass.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace memra::kernels::cuda {

absl::string_view DecodeClassName(DecodeClass c) { return c == DecodeClass::kExact ? "exact" : "bucket"; }

absl::StatusOr<DecodeClass> ParseDecodeClass(absl::string_view name) {
  if (name == "bucket") return DecodeClass::kBucket;
  if (name == "exact") return DecodeClass::kExact;
  return absl::InvalidArgumentError(
      absl::StrCat("decode class \"", name, "\" is not one of bucket (the default), exact (batch-invariant)"));
}

bool WriteDecodeClass(DecodeClass c, ir::Module& m) {
  if (c == DecodeClass::kBucket) return m.attrs().Erase("decode_class");  // the default goes unwritten
  const std::string name(DecodeClassName(c));
  if (m.attrs().GetString("decode_class") == name) return false;
  m.attrs().Set("decode_class", name);
  return true;
}

absl::StatusOr<DecodeClass> ReadDecodeClass(const ir::Module& m) {
  const std::optional<std::string> name = m.attrs().GetString("decode_class");
  if (!name) return DecodeClass::kBucket;
  auto c = ParseDecodeClass(*name);
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat("module attribute decode_class: ", c.status().message()));
  return *c;
}

}  // namespace memra::kernels::cuda
