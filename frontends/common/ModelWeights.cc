#include "frontends/common/ModelWeights.h"

#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/TensorName.h"
#include "ir/Op.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

absl::Status DeclareWeight(const gguf::GgufFile& file, ir::Module& m, const std::string& name,
                           std::vector<int64_t> ne) {
  MEMRA_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, file.GetTensor(name));
  // Trailing 1s are not shape (ggml pads ne with them): {n} and {n, 1} are the same tensor.
  std::vector<int64_t> got = t->ne, want = ne;
  while (got.size() > 1 && got.back() == 1) got.pop_back();
  while (want.size() > 1 && want.back() == 1) want.pop_back();
  if (got != want)
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor \"", name, "\" has shape ",
                                                   gguf::ShapeString(t->ne), ", expected ", gguf::ShapeString(ne)));
  std::optional<ir::DType> dt = ir::DTypeFromGgmlId(static_cast<uint32_t>(t->type));
  if (!dt)
    return absl::UnimplementedError(absl::StrCat(file.path(), ": tensor \"", name, "\" has type ",
                                                 gguf::GgmlTypeName(t->type), ", which the IR has no dtype for"));
  if (ir::IsQuantized(*dt) && ne[0] % ir::InfoOf(*dt).block_elems != 0)
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor \"", name, "\": ne0 = ", ne[0],
                                                   " is not a multiple of the ", ir::DTypeName(*dt), " block size"));
  if (m.AddWeightNe(name, *dt, ne) == nullptr)
    return absl::InternalError(absl::StrCat("weight ", name, " declared twice"));
  return absl::OkStatus();
}

absl::Status CheckValueWeightsAreF32(const gguf::GgufFile& file, const ir::Module& m) {
  for (const auto& w : m.weights()) {
    if (w->dtype() == ir::DType::kF32) continue;
    for (const ir::Use& u : w->uses()) {
      if (ir::IsMatrixOperand(*u.user, u.operand_index)) continue;
      return absl::UnimplementedError(absl::StrCat(file.path(), ": tensor \"", w->name(), "\" has type ",
                                                   ir::DTypeName(w->dtype()),
                                                   "; norm, bias and conv tensors must be f32"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLayerTensors(const gguf::GgufFile& file, int64_t block_count, int64_t nextn,
                               const std::string& block_count_key) {
  std::map<int64_t, bool> mtp_has_nextn;  // the MTP layers that hold tensors: whether nextn ones
  std::set<int64_t> layers;               // the layers that hold tensors
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::optional<gguf::LayerTensorName> parsed = gguf::ParseLayerTensorName(t.name);
    if (!parsed) continue;
    const int64_t layer = parsed->layer;
    if (layer >= block_count)
      return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor ", t.name, " belongs to layer ", layer,
                                                     ", but ", block_count_key, " is ", block_count,
                                                     ": the file holds layers its metadata does not count"));
    if (layer >= block_count - nextn) mtp_has_nextn[layer] |= absl::StartsWith(parsed->rest, "nextn.");
    layers.insert(layer);
  }
  // Every layer holds tensors (a norm at least): a block_count past the file's layers is refused here,
  // before per-layer tables of that size are made (block_count 1e9 took 16 GB of host memory).
  if (static_cast<int64_t>(layers.size()) < block_count) {
    int64_t missing = 0;
    while (layers.count(missing) != 0) ++missing;
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", block_count_key, " is ", block_count,
                                                   ", but the file holds no tensor of layer ", missing, " (blk.",
                                                   missing, ".*): its layers are fewer than its metadata counts"));
  }
  for (const auto& [layer, has] : mtp_has_nextn)
    if (!has)
      return absl::InvalidArgumentError(
          absl::StrCat(file.path(), ": layer ", layer, " is counted as an MTP block (the last ", nextn,
                       " of the layers), but holds no blk.", layer, ".nextn.* tensor: a trunk layer would be skipped"));
  return absl::OkStatus();
}

}  // namespace memra::frontends
