// The model-family registry: what memra does with each `general.architecture` value.
//
// A family is a hyperparameter reader and a lowering (GGUF -> ir::Module), listed in
// frontends/ModelFamilies.def. Every command and runtime::Session lowers through LowerModel, so a
// new family is one entry there plus its folder (frontends/<family>/), built from the shared
// layer builders of frontends/common/. The table is explicit (no self-registering statics: the
// linker would drop them from the static library).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "frontends/LowerOptions.h"
#include "ir/Attribute.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct ModelFamily {
  using ReadHparamsFn = absl::StatusOr<ir::AttrDict> (*)(const gguf::GgufFile&);
  using LowerFn = absl::StatusOr<std::unique_ptr<ir::Module>> (*)(const gguf::GgufFile&, const LowerOptions&);

  absl::string_view architecture;  // the `general.architecture` value
  absl::string_view description;   // for people: what the family is
  // Reads and checks the hyperparameters; returns them as the lowered module's attributes
  // (same names and values; n_ctx is the default context). nullptr for a planned family.
  ReadHparamsFn read_hparams = nullptr;
  // nullptr: a planned family, known but not lowered yet ("<arch> not supported yet").
  LowerFn lower = nullptr;

  bool supported() const { return lower != nullptr; }
};

// Every family, supported and planned, in ModelFamilies.def order.
absl::Span<const ModelFamily> ModelFamilies();
// The architectures memra lowers, in table order ("qwen35").
std::vector<std::string> SupportedArchitectures();
// The entry for `architecture`, or nullptr when the table has none.
const ModelFamily* FindModelFamily(absl::string_view architecture);

// The supported family of the file's `general.architecture`. Errors (all naming the file):
// the key missing (NotFound); a planned family (Unimplemented, "architecture \"qwen35moe\":
// qwen35moe not supported yet"); any other architecture (Unimplemented, "unsupported
// architecture 'llama': memra supports qwen35").
absl::StatusOr<const ModelFamily*> ModelFamilyOf(const gguf::GgufFile& file);

// The family's hyperparameters of `file` (ModelFamily::read_hparams).
absl::StatusOr<ir::AttrDict> ReadHparams(const gguf::GgufFile& file);

// Lowers `file` with its family: the one entry point of the commands and the runtime.
absl::StatusOr<std::unique_ptr<ir::Module>> LowerModel(const gguf::GgufFile& file, const LowerOptions& options = {});

}  // namespace memra::frontends
