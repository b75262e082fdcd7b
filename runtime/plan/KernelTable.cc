#include "runtime/plan/KernelTable.h"

#include <chrono>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codegen/KernelModules.h"
#include "ir/Function.h"
#include "ir/Op.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOpRegistry.h"

namespace memra::runtime {
namespace {

// The module key of a `kernels` entry "KEY::entry".
absl::string_view ModuleKeyOf(absl::string_view kernel) {
  size_t p = kernel.rfind("::");
  return p == absl::string_view::npos ? kernel : kernel.substr(0, p);
}

}  // namespace

absl::StatusOr<int> ArchNumber(absl::string_view arch) {
  absl::string_view rest = arch;
  int v = 0;
  if (!absl::ConsumePrefix(&rest, "sm_") || (absl::ConsumeSuffix(&rest, "a"), !absl::SimpleAtoi(rest, &v)) || v < 50)
    return absl::InvalidArgumentError(absl::StrCat("\"", arch, "\" is not a CUDA architecture (sm_NN)"));
  return v;
}

absl::StatusOr<std::vector<codegen::ModuleSpec>> KernelModulesOf(const ir::Module& module) {
  namespace kcu = memra::kernels::cuda;
  std::vector<codegen::ModuleSpec> out;
  std::set<std::string> seen;
  // The recorded target (select-kernels), else the default preset.
  MEMRA_ASSIGN_OR_RETURN(std::optional<kcu::Target> recorded, kcu::ReadSelectionTarget(module));
  kcu::Target target;
  if (recorded) {
    target = *recorded;
  } else {
    MEMRA_ASSIGN_OR_RETURN(target, kcu::TargetPreset("sm_90"));
  }
  // The recorded weight mode (select-kernels), else the default.
  MEMRA_ASSIGN_OR_RETURN(std::optional<kcu::WeightMode> recorded_weights, kcu::ReadSelectionWeights(module));
  const kcu::WeightMode weights = recorded_weights.value_or(kcu::WeightMode::kBlocks);
  for (const auto& f : module.functions()) {
    if (!kcu::IsStaticFunction(*f)) continue;
    const int64_t bucket = f->attrs().I64Or("bucket", 1);
    auto mods = codegen::ModulesForFunction(*f, bucket, target, weights);
    if (!mods.ok())
      return absl::Status(mods.status().code(),
                          absl::StrCat("kernel table: @", f->name(), ": ", mods.status().message()));
    for (codegen::ModuleSpec& m : *mods)
      if (seen.insert(m.Key()).second) out.push_back(std::move(m));
    if (!recorded) continue;
    // The records must be what the units select today for their target (stale annotations,
    // e.g. from an older memra, would run other kernels than the ones the table compiles).
    auto fresh = kcu::SelectionsOf(*f, bucket, target, weights, /*use_records=*/false);
    if (!fresh.ok())
      return absl::Status(fresh.status().code(),
                          absl::StrCat("kernel table: @", f->name(), ": ", fresh.status().message()));
    size_t i = 0;
    for (const ir::Op* op : f->Ops()) {
      if (op->is(ir::OpKind::kSegment)) continue;
      const kcu::OpSelection& now = (*fresh)[i++];
      MEMRA_ASSIGN_OR_RETURN(std::optional<kcu::OpSelection> rec, kcu::ReadSelection(*op));
      std::vector<std::string> a, b;
      if (rec)
        for (const kcu::Launch& l : rec->launches) a.push_back(l.kernel.ToString());
      for (const kcu::Launch& l : now.launches) b.push_back(l.kernel.ToString());
      if ((rec && rec->impl != now.impl) || a != b)
        return absl::FailedPreconditionError(absl::StrCat(
            "kernel table: @", f->name(), ": ", op->Summary(), " records ", rec ? rec->impl : "no selection",
            a.empty() ? "" : absl::StrCat(" (", a[0], a.size() > 1 ? ", ..." : "", ")"),
            ", but kernel selection makes ", now.impl, " for it (stale select-kernels annotations?)"));
    }
  }
  return out;
}

absl::StatusOr<KernelTable> BuildKernelTable(const ir::Module& module, absl::string_view arch,
                                             codegen::CompileOptions options) {
  MEMRA_ASSIGN_OR_RETURN(options.arch, ArchNumber(arch));
  if (auto sel = module.attrs().GetString("kernel_arch"); sel && *sel != arch)
    return absl::FailedPreconditionError(absl::StrCat("kernel table: the IR's kernels were selected for ", *sel,
                                                      " (select-kernels{arch=...}) but the plan targets ", arch));
  MEMRA_ASSIGN_OR_RETURN(std::vector<codegen::ModuleSpec> modules, KernelModulesOf(module));
  KernelTable t;
  t.version = kKernelTableVersion;
  if (modules.empty()) return t;
  auto compiler = codegen::KernelCompiler::Create(options);
  if (!compiler.ok())
    return absl::Status(compiler.status().code(),
                        absl::StrCat("kernel table for ", arch, ": ", compiler.status().message(),
                                     " (NVRTC compiles the plan's kernels; use --arch cpu for a plan without them)"));
  MEMRA_ASSIGN_OR_RETURN(auto cubins, (*compiler)->CompileAll(modules));
  for (size_t i = 0; i < modules.size(); ++i) {
    const codegen::ModuleSpec& m = modules[i];
    KernelEntry e;
    e.name = m.Key();
    e.file = m.file;
    std::vector<std::string> defs;
    for (const auto& [n, v] : m.defines) defs.push_back(absl::StrCat(n, "=", v));
    e.constants = absl::StrJoin(defs, ";");
    e.sm_90a = m.sm_90a;
    MEMRA_ASSIGN_OR_RETURN(e.source_hash, codegen::ModuleSourceHash(m));
    e.binaries.push_back({std::string(arch), std::string(cubins[i]->begin(), cubins[i]->end())});
    t.kernels.push_back(std::move(e));
  }
  t.compile_stats = (*compiler)->stats();
  return t;
}

absl::Status CheckKernelTable(const KernelTable& table, const ir::Module& module, absl::string_view arch) {
  for (const auto& f : module.functions())
    for (const ir::Op* op : f->Ops()) {
      auto names = op->attrs().GetStringArray("kernels");
      if (!names) continue;
      for (const std::string& k : *names) {
        const absl::string_view key = ModuleKeyOf(k);
        const KernelEntry* e = table.Find(key);
        if (e == nullptr)
          return absl::DataLossError(absl::StrCat("plan: the kernel table lacks kernel module ", key, " (", k,
                                                  ", used by @", f->name(), ": ", op->Summary(),
                                                  "); recompile the plan"));
        bool has_arch = false;
        for (const KernelBinary& b : e->binaries) has_arch |= b.arch == arch && !b.cubin.empty();
        if (!has_arch)
          return absl::DataLossError(
              absl::StrCat("plan: kernel module ", key, " has no cubin for ", arch, "; recompile the plan"));
      }
    }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const codegen::PrecompiledCubins>> PrecompiledKernels(const Plan& plan) {
  auto out = std::make_shared<codegen::PrecompiledCubins>();
  for (const KernelEntry& e : plan.kernels.kernels) {
    codegen::ModuleSpec m;
    m.file = e.file;
    m.sm_90a = e.sm_90a;
    std::vector<std::pair<std::string, std::string>> defs;
    for (absl::string_view kv : absl::StrSplit(e.constants, ';', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      defs.push_back(std::move(p));
    }
    m.defines = codegen::MakeDefines(std::move(defs));
    if (m.Key() != e.name)
      return absl::DataLossError(absl::StrCat("plan: kernel ", e.name, ": its file and constants make ", m.Key()));
    auto hash = codegen::ModuleSourceHash(m);
    if (!hash.ok() || *hash != e.source_hash)
      return absl::FailedPreconditionError(
          absl::StrCat("plan: kernel ", e.name, ": ",
                       hash.ok() ? "its source changed since the plan was compiled" : hash.status().message(),
                       "; recompile the plan with this memra"));
    for (const KernelBinary& b : e.binaries)
      if (b.arch == plan.arch)
        (*out)[e.name] = std::make_shared<const std::vector<uint8_t>>(b.cubin.begin(), b.cubin.end());
  }
  return std::shared_ptr<const codegen::PrecompiledCubins>(std::move(out));
}

}  // namespace memra::runtime
