#include "frontends/common/KeyReader.h"

#include <cmath>
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

absl::Status KeyReader::CheckArrayLength(absl::string_view k, size_t n, int64_t n_layer) const {
  const int64_t want = ArrayLength(n_layer);
  if (static_cast<int64_t>(n) == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(f_.path(), ": key \"", Key(k), "\" has ", n, " entries, expected ", want, " (block_count)"));
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
  MEMRA_RETURN_IF_ERROR(CheckArrayLength(k, arr.size(), n_layer));
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
  MEMRA_RETURN_IF_ERROR(CheckArrayLength(k, arr.size(), n_layer));
  arr.resize(static_cast<size_t>(n_layer));
  return arr;
}

absl::Status Inconsistent(const gguf::GgufFile& f, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(f.path(), ": inconsistent hyperparameters: ", what));
}

absl::StatusOr<double> KeyReader::PositiveF32(absl::string_view k, std::optional<float> def) const {
  float v = 0;
  if (def) {
    MEMRA_ASSIGN_OR_RETURN(v, f_.GetF32Or(Key(k), *def));
  } else {
    MEMRA_ASSIGN_OR_RETURN(v, f_.GetF32(Key(k)));
  }
  if (!(v > 0) || !std::isfinite(v)) return Inconsistent(f_, absl::StrCat(Key(k), " = ", v, " must be > 0"));
  return v;
}

absl::StatusOr<std::vector<bool>> KeyReader::LayerFlags(absl::string_view k, int64_t n_layer) const {
  const std::string key = Key(k);
  const gguf::Value* v = f_.Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(f_.path(), ": key \"", key, "\" not found"));
  if (v->type == gguf::ValueType::kArray) {
    MEMRA_ASSIGN_OR_RETURN(std::vector<bool> p, f_.GetBoolArray(key));
    if (static_cast<int64_t>(p.size()) != ArrayLength(n_layer))
      return Inconsistent(f_, absl::StrCat(key, " has ", p.size(), " entries, expected ", ArrayLength(n_layer)));
    p.resize(static_cast<size_t>(n_layer));
    return p;
  }
  MEMRA_ASSIGN_OR_RETURN(bool all, f_.GetBool(key));
  return std::vector<bool>(static_cast<size_t>(n_layer), all);
}

absl::Status KeyReader::RejectRopeScaling() const {
  if (f_.Has(Key("rope.scaling.type"))) {
    MEMRA_ASSIGN_OR_RETURN(std::string t, f_.GetString(Key("rope.scaling.type")));
    if (t != "none" && !t.empty())
      return absl::UnimplementedError(absl::StrCat(f_.path(), ": key \"", Key("rope.scaling.type"), "\" = \"", t,
                                                   "\": rope scaling is not supported yet"));
  }
  if (f_.Has(Key("rope.scaling.factor"))) {
    MEMRA_ASSIGN_OR_RETURN(float factor, f_.GetF32(Key("rope.scaling.factor")));
    if (factor != 0.0f && factor != 1.0f)
      return absl::UnimplementedError(absl::StrCat(f_.path(), ": key \"", Key("rope.scaling.factor"), "\" = ", factor,
                                                   ": rope scaling is not supported yet"));
  }
  return absl::OkStatus();
}

}  // namespace memra::frontends
