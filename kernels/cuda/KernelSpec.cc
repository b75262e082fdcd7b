#include "kernels/cuda/KernelSpec.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memra::kernels::cuda {

std::string ModuleSpec::Key() const {
  std::vector<std::string> parts;
  for (const auto& [n, v] : defines) parts.push_back(absl::StrCat(n, "=", v));
  return absl::StrCat(file, sm_90a ? "[sm_90a]" : "", "<", absl::StrJoin(parts, ","), ">");
}

Defines MakeDefines(std::vector<std::pair<std::string, std::string>> d) {
  std::sort(d.begin(), d.end());
  return d;
}

absl::StatusOr<ModuleSpec> ParseModuleKey(absl::string_view key) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("kernel module \"", key, "\": ", why));
  };
  const size_t open = key.find('<');
  if (open == absl::string_view::npos || !absl::EndsWith(key, ">")) return bad("expected FILE<NAME=VALUE,...>");
  ModuleSpec m;
  absl::string_view file = key.substr(0, open);
  m.sm_90a = absl::ConsumeSuffix(&file, "[sm_90a]");
  if (file.empty()) return bad("no file");
  m.file = std::string(file);
  const absl::string_view body = key.substr(open + 1, key.size() - open - 2);
  if (!body.empty())
    for (absl::string_view part : absl::StrSplit(body, ',')) {
      const size_t eq = part.find('=');
      if (eq == absl::string_view::npos || eq == 0) return bad(absl::StrCat("define \"", part, "\" is not NAME=VALUE"));
      m.defines.emplace_back(std::string(part.substr(0, eq)), std::string(part.substr(eq + 1)));
    }
  if (!std::is_sorted(m.defines.begin(), m.defines.end())) return bad("defines are not sorted by name");
  return m;
}

absl::StatusOr<KernelSpec> ParseKernelName(absl::string_view name) {
  const size_t sep = name.rfind("::");
  if (sep == absl::string_view::npos || sep + 2 == name.size())
    return absl::InvalidArgumentError(absl::StrCat("kernel \"", name, "\": expected MODULE::ENTRY"));
  KernelSpec k;
  auto m = ParseModuleKey(name.substr(0, sep));
  if (!m.ok()) return m.status();
  k.module = std::move(*m);
  k.entry = std::string(name.substr(sep + 2));
  return k;
}

}  // namespace memra::kernels::cuda
