#include "frontends/common/KeyReader.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

std::string KeyReader::Key(absl::string_view k) const { return absl::StrCat(prefix_, ".", k); }

absl::StatusOr<int64_t> KeyReader::Required(absl::string_view k) const {
  MEMRA_ASSIGN_OR_RETURN(uint32_t v, f_.GetU32(Key(k)));
  return static_cast<int64_t>(v);
}

absl::StatusOr<int64_t> KeyReader::Optional(absl::string_view k, int64_t def) const {
  if (!f_.Has(Key(k))) return def;
  return Required(k);
}

absl::StatusOr<int64_t> KeyReader::UniformPerLayer(absl::string_view k, int64_t n_layer,
                                                   std::optional<int64_t> def) const {
  const gguf::Value* v = f_.Find(Key(k));
  if (v == nullptr) {
    if (def) return *def;
    return absl::NotFoundError(absl::StrCat(f_.path(), ": key \"", Key(k), "\" not found"));
  }
  if (v->type != gguf::ValueType::kArray) return Required(k);
  MEMRA_ASSIGN_OR_RETURN(std::vector<int64_t> arr, f_.GetIntArray(Key(k)));
  if (static_cast<int64_t>(arr.size()) < n_layer)
    return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": key \"", Key(k), "\" has ", arr.size(),
                                                   " entries, expected ", n_layer, " (block_count)"));
  for (int64_t i = 1; i < n_layer; ++i)
    if (arr[i] != arr[0])
      return absl::UnimplementedError(absl::StrCat(f_.path(), ": key \"", Key(k),
                                                   "\": per-layer values differ (layer 0: ", arr[0], ", layer ", i,
                                                   ": ", arr[i], "); non-uniform layers are not supported yet"));
  if (arr.empty()) return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": key \"", Key(k), "\" is empty"));
  return arr[0];
}

absl::StatusOr<std::vector<int64_t>> KeyReader::PerLayer(absl::string_view k, int64_t n_layer,
                                                         std::optional<int64_t> def) const {
  const gguf::Value* v = f_.Find(Key(k));
  if (v == nullptr) {
    if (def) return std::vector<int64_t>(static_cast<size_t>(n_layer), *def);
    return absl::NotFoundError(absl::StrCat(f_.path(), ": key \"", Key(k), "\" not found"));
  }
  if (v->type != gguf::ValueType::kArray) {
    MEMRA_ASSIGN_OR_RETURN(int64_t x, Required(k));
    return std::vector<int64_t>(static_cast<size_t>(n_layer), x);
  }
  MEMRA_ASSIGN_OR_RETURN(std::vector<int64_t> arr, f_.GetIntArray(Key(k)));
  if (static_cast<int64_t>(arr.size()) < n_layer)
    return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": key \"", Key(k), "\" has ", arr.size(),
                                                   " entries, expected ", n_layer, " (block_count)"));
  arr.resize(static_cast<size_t>(n_layer));
  return arr;
}

absl::Status Inconsistent(const gguf::GgufFile& f, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(f.path(), ": inconsistent hyperparameters: ", what));
}

}  // namespace memra::frontends
