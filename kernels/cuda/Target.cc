#include "kernels/cuda/Target.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memra::kernels::cuda {
namespace {

Target Preset(std::string name, int arch, int sms, int64_t optin_kib, int64_t sm_kib, int64_t l2_mib, int cluster,
              int64_t mem_gbps, int64_t bf16_tflops) {
  Target t;
  t.mem_gbps = mem_gbps;
  t.bf16_tflops = bf16_tflops;
  t.name = std::move(name);
  t.arch = arch;
  t.sm_count = sms;
  t.smem_per_block_optin = optin_kib << 10;
  t.smem_per_sm = sm_kib << 10;
  t.l2_bytes = l2_mib << 20;
  t.max_cluster_blocks = cluster;
  return t;
}

// Data-sheet values (CUDA programming guide, compute capability tables).
const std::map<std::string, Target>& Presets() {
  static const auto* presets = new std::map<std::string, Target>{
      // Ceilings: the H200 as measured (MeasuredCeilings); the others' data sheets.
      {"sm_90", Preset("H100/H200 (sm_90 preset)", 90, 132, 227, 228, 50, 8, 4600, 790)},
      {"sm_89", Preset("L40S (sm_89 preset)", 89, 142, 99, 100, 96, 1, 864, 362)},
      {"sm_80", Preset("A100 SXM (sm_80 preset)", 80, 108, 163, 164, 40, 1, 2039, 312)},
  };
  return *presets;
}

}  // namespace

std::string Target::ArchName() const { return absl::StrCat("sm_", arch); }

int64_t Bf16FlopsPerClockPerSm(int arch) {
  switch (arch) {
    case 80:
    case 86:
      return 2048;
    case 89:
      return 1024;
    case 90:
      return 4096;
    default:
      return 0;
  }
}

bool MeasuredCeilings(absl::string_view device_name, int64_t* mem_gbps, int64_t* bf16_tflops) {
  // The H200 of the device machine: 16-byte streaming loads over 8 GiB read 4.60 TB/s; cuBLASLt
  // bf16 GEMMs on random data reach ~790 TFLOP/s (/work/shared/design/h200-measurements.md).
  if (absl::StrContains(device_name, "H200")) {
    *mem_gbps = 4600;
    *bf16_tflops = 790;
    return true;
  }
  return false;
}

std::string Target::Serialize() const {
  return absl::StrCat(
      "arch=", ArchName(), " sm_count=", sm_count, " max_threads_per_block=", max_threads_per_block,
      " warp_size=", warp_size, " smem_per_block=", smem_per_block, " smem_per_block_optin=", smem_per_block_optin,
      " smem_per_sm=", smem_per_sm, " l2_bytes=", l2_bytes, " max_cluster_blocks=", max_cluster_blocks,
      " memory_bytes=", memory_bytes, " mem_gbps=", mem_gbps, " bf16_tflops=", bf16_tflops, " name=", name);
}

absl::StatusOr<Target> Target::Parse(absl::string_view line) {
  Target t;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("target \"", line, "\": ", why));
  };
  // name= comes last and may contain spaces.
  absl::string_view fields = line;
  if (const size_t at = line.find(" name="); at != absl::string_view::npos) {
    t.name = std::string(line.substr(at + 6));
    fields = line.substr(0, at);
  }
  bool have_arch = false;
  for (absl::string_view kv : absl::StrSplit(fields, ' ', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) return bad(absl::StrCat("\"", kv, "\" is not key=value"));
    const absl::string_view k = kv.substr(0, eq);
    absl::string_view v = kv.substr(eq + 1);
    if (k == "arch") {
      if (!absl::ConsumePrefix(&v, "sm_") || !absl::SimpleAtoi(v, &t.arch)) return bad("arch is not sm_NN");
      have_arch = true;
      continue;
    }
    int64_t n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < 0) return bad(absl::StrCat(k, " is not a non-negative integer"));
    if (k == "sm_count")
      t.sm_count = static_cast<int>(n);
    else if (k == "max_threads_per_block")
      t.max_threads_per_block = static_cast<int>(n);
    else if (k == "warp_size")
      t.warp_size = static_cast<int>(n);
    else if (k == "smem_per_block")
      t.smem_per_block = n;
    else if (k == "smem_per_block_optin")
      t.smem_per_block_optin = n;
    else if (k == "smem_per_sm")
      t.smem_per_sm = n;
    else if (k == "l2_bytes")
      t.l2_bytes = n;
    else if (k == "max_cluster_blocks")
      t.max_cluster_blocks = static_cast<int>(n);
    else if (k == "memory_bytes")
      t.memory_bytes = n;
    else if (k == "mem_gbps")
      t.mem_gbps = n;
    else if (k == "bf16_tflops")
      t.bf16_tflops = n;
    else
      return bad(absl::StrCat("unknown field \"", k, "\""));
  }
  if (!have_arch) return bad("no arch");
  if (t.sm_count <= 0) return bad("sm_count must be positive");
  return t;
}

absl::StatusOr<Target> TargetPreset(absl::string_view arch) {
  absl::string_view a = arch;
  absl::ConsumeSuffix(&a, "a");  // sm_90a: the same chip, arch-specific instructions
  auto it = Presets().find(std::string(a));
  if (it == Presets().end())
    return absl::InvalidArgumentError(
        absl::StrCat("unknown CUDA target \"", arch, "\" (presets: ", absl::StrJoin(TargetPresetNames(), ", "), ")"));
  return it->second;
}

absl::Status CheckKernelsSupport(const Target& t) {
  if (t.arch == 90) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      t.name, absl::StrContains(t.name, t.ArchName()) ? "" : absl::StrCat(" (", t.ArchName(), ")"),
      ": memra's CUDA kernels are built for sm_90 (H100 / H200: bulk tensor copies, mbarriers, thread-block "
      "clusters); ",
      t.ArchName(), " is not supported yet (use --backend cpu, or --arch cpu for a plan)"));
}

std::vector<std::string> TargetPresetNames() {
  std::vector<std::string> out;
  for (const auto& [k, v] : Presets()) out.push_back(k);
  return out;
}

std::vector<std::string> SelectionMismatches(const Target& compiled, const Target& device) {
  std::vector<std::string> out;
  if (compiled.arch != device.arch)
    out.push_back(absl::StrCat("arch: compiled ", compiled.ArchName(), ", device ", device.ArchName()));
  if (compiled.sm_count != device.sm_count)
    out.push_back(absl::StrCat("sm_count: compiled ", compiled.sm_count, ", device ", device.sm_count));
  return out;
}

}  // namespace memra::kernels::cuda
