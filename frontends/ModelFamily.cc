#include "frontends/ModelFamily.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontends/gemma4/Gemma4Hparams.h"
#include "frontends/gemma4/Gemma4Lowering.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/qwen35/Qwen35Hparams.h"
#include "frontends/qwen35/Qwen35Lowering.h"
#include "frontends/qwen35moe/Qwen35MoeHparams.h"
#include "frontends/qwen35moe/Qwen35MoeLowering.h"
#include "frontends/step35/Step35Hparams.h"
#include "frontends/step35/Step35Lowering.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {
namespace {

constexpr ModelFamily kFamilies[] = {
#define MEMRA_MODEL_FAMILY(arch, desc, read_hparams, lower) {arch, desc, &read_hparams, &lower},
#define MEMRA_PLANNED_FAMILY(arch, desc) {arch, desc, nullptr, nullptr},
#include "frontends/ModelFamilies.def"
#undef MEMRA_PLANNED_FAMILY
#undef MEMRA_MODEL_FAMILY
};

}  // namespace

absl::Span<const ModelFamily> ModelFamilies() { return kFamilies; }

std::vector<std::string> SupportedArchitectures() {
  std::vector<std::string> out;
  for (const ModelFamily& f : kFamilies)
    if (f.supported()) out.emplace_back(f.architecture);
  return out;
}

const ModelFamily* FindModelFamily(absl::string_view architecture) {
  for (const ModelFamily& f : kFamilies)
    if (f.architecture == architecture) return &f;
  return nullptr;
}

absl::StatusOr<const ModelFamily*> ModelFamilyOf(const gguf::GgufFile& file) {
  MEMRA_ASSIGN_OR_RETURN(std::string arch, file.Architecture());
  const ModelFamily* family = FindModelFamily(arch);
  if (family == nullptr)
    return absl::UnimplementedError(absl::StrCat(file.path(), ": unsupported architecture '", arch,
                                                 "': memra supports ", absl::StrJoin(SupportedArchitectures(), ", ")));
  if (!family->supported())
    return absl::UnimplementedError(
        absl::StrCat(file.path(), ": architecture \"", arch, "\": ", arch, " not supported yet"));
  return family;
}

absl::StatusOr<ir::AttrDict> ReadHparams(const gguf::GgufFile& file) {
  MEMRA_ASSIGN_OR_RETURN(const ModelFamily* family, ModelFamilyOf(file));
  return family->read_hparams(file);
}

absl::StatusOr<std::unique_ptr<ir::Module>> LowerModel(const gguf::GgufFile& file, const LowerOptions& options) {
  MEMRA_ASSIGN_OR_RETURN(const ModelFamily* family, ModelFamilyOf(file));
  return family->lower(file, options);
}

}  // namespace memra::frontends
