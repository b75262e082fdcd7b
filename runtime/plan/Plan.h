// The plan file: everything `memra run` needs to start without compiling, in one file.
//
//   MEMRAPLAN 2                                  magic and format version
//   [header] bytes=N                             key = value lines: format_version, memra_version,
//                                                arch, target, weights, pipeline, gguf_path,
//                                                gguf_size, gguf_header_sha256
//   [ir] bytes=N                                 the final IR text (ir/Printer.h), which also
//                                                carries the arena offsets and the segments
//   [layout] bytes=N                             per function (bucket): arena size, naive size,
//                                                alignment, every buffer, every segment (a
//                                                readable summary, checked against the IR at load)
//   [kernels] version=V bytes=N                  the kernel table (runtime/plan/KernelTable.h):
//     [kernel] bytes=N                           version 1, per compiled kernel module (one
//       name = "Norm.cu<NORM_BLOCK=64,...>"      kernels/cuda file + -D constants): its key
//       file = "Norm.cu"                         (ModuleSpec::Key(), what the ops' `kernels`
//       constants = "NORM_BLOCK=64;..."          attributes name before "::entry"), file,
//       sm_90a = 0                               constants, arch-specific flag, the hash of its
//       source_hash = "..."                      source + headers + defines, and
//       binaries = 1                             its cubins, each
//     [cubin] arch=sm_90 xxh64=H bytes=N         the NVRTC output for one arch (hash checked).
//                                                Version 0 = empty: `--arch cpu` plans (and
//                                                plans from before the table existed).
//   [end]
//   xxh64 H                                      format 2: the hash of every byte before this
//                                                line (a plan changed after compilation, by a
//                                                flipped bit or an edit, is refused as damaged)
//
// Every section gives its byte length, so binary payloads (cubins) need no escaping. A reader
// refuses other magic, a newer format version, unknown kernel-table versions, truncation, a
// cubin whose bytes do not match their hash, a layout that disagrees with the IR, and (at
// LoadPlanModule) a version-1 table lacking a kernel module an op names or its cubin for the
// plan's arch. The GGUF identity is its size and the SHA-256 of its header
// (metadata and tensor table: names, types, shapes, offsets); the path is recorded to find the
// file, but a copy elsewhere with the same identity is accepted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/KernelCompiler.h"
#include "ir/Module.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::runtime {

// 2: the file ends with its xxh64 line; 1 (no such line) is still read.
inline constexpr int kPlanFormatVersion = 2;
// The kernel table's version written for CUDA targets: 1 = per kernel module its key, file,
// constants, source hash and cubins. 0 = an empty table (cpu plans); both are read.
inline constexpr int kKernelTableVersion = 1;

struct GgufIdentity {
  std::string path;
  uint64_t size = 0;
  std::string header_sha256;  // hex, of the bytes before the data section
};
GgufIdentity IdentifyGguf(const gguf::GgufFile& file);
// What differs between the identity a plan recorded and a file's ("" when they match; the path
// alone does not count).
std::string GgufIdentityDiff(const GgufIdentity& plan, const GgufIdentity& file);

struct PlanBuffer {
  std::string value;  // the value's printed name (without '%')
  int64_t offset = 0;
  int64_t bytes = 0;     // 0 for an alias
  std::string alias_of;  // root value of a reshape alias, else ""
};

struct PlanSegment {
  bool capturable = false;
  int64_t ops = 0;
  bool kv_rung = false;
  std::string reason;  // eager: why; capturable: why it ends
};

struct PlanFunction {
  std::string name;
  int64_t bucket = 0;       // 0: none
  int64_t arena_bytes = 0;  // 0 with no memory plan
  int64_t naive_bytes = 0;
  int64_t alignment = 0;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanSegment> segments;
  bool operator==(const PlanFunction& o) const;
};

struct KernelBinary {
  std::string arch;   // "sm_90"
  std::string cubin;  // bytes (an ELF)
};
struct KernelEntry {
  std::string name;         // the module key, codegen::ModuleSpec::Key()
  std::string file;         // kernels/cuda file, "Norm.cu"
  std::string constants;    // specialization constants (-D), "K=V;K=V"
  bool sm_90a = false;      // compiled for the arch-specific target
  std::string source_hash;  // codegen::ModuleSourceHash: source + headers + defines
  std::vector<KernelBinary> binaries;
};
struct KernelTable {
  int version = 0;  // 0: empty; kKernelTableVersion when built
  std::vector<KernelEntry> kernels;
  // How the builder got the cubins (not serialized; `memra compile --report`).
  codegen::CompileStats compile_stats;
  const KernelEntry* Find(absl::string_view name) const;
  int64_t CubinBytes() const;  // all binaries
};

// The kernel-table builder MakePlan runs for a CUDA arch (never for "cpu": an empty version-0
// table). Default: BuildKernelTable (runtime/plan/KernelTable.h: the modules the static
// functions select, compiled with NVRTC); SetKernelTableBuilder replaces it (tests), nullptr
// restores the default.
using KernelTableBuilder = absl::StatusOr<KernelTable> (*)(const ir::Module& module, absl::string_view arch);
void SetKernelTableBuilder(KernelTableBuilder builder);
KernelTableBuilder GetKernelTableBuilder();

struct Plan {
  int format_version = kPlanFormatVersion;
  std::string memra_version;
  std::string arch;  // "sm_90", or "cpu"
  // CUDA: the target the kernels were selected for (kernels/cuda/Target.h Serialize; the module's
  // kernel_arch / kernel_sm_count, else the arch's preset); empty for cpu and older plans.
  std::string target;
  // CUDA: how block-format matrices are held ("blocks" or "bf16", kernels/cuda/WeightLayout.h
  // WeightMode; the module's kernel_weights): memra run holds them so; empty for cpu plans, and
  // for CUDA plans from before the line existed (whose block formats were bf16 copies).
  std::string weights;
  std::string pipeline;  // the pipeline that produced the IR
  GgufIdentity gguf;
  std::string ir_text;
  std::vector<PlanFunction> functions;
  KernelTable kernels;
};

// The per-function layout recorded in a compiled module's attributes (plan-memory,
// partition-segments). Value names are those the printer gives (unique per function).
absl::StatusOr<std::vector<PlanFunction>> DescribeFunctions(const ir::Module& module);

// A plan for `module` compiled from `file`; for a CUDA arch with the kernel table of
// GetKernelTableBuilder() (NVRTC: fails clearly where it cannot be loaded), built over the
// module as the plan's IR text reads back; for "cpu" an empty version-0 table.
absl::StatusOr<Plan> MakePlan(const ir::Module& module, const gguf::GgufFile& file, absl::string_view arch,
                              absl::string_view pipeline, absl::string_view memra_version);

std::string SerializePlan(const Plan& plan);

// The weight mode of a CUDA plan: its `weights` line, bf16 for a CUDA plan without one (older
// plans), nullopt for cpu plans.
absl::StatusOr<std::optional<kernels::cuda::WeightMode>> PlanWeights(const Plan& plan);

// For a CUDA plan run on `device`: refused when the selection fields of the plan's target differ
// (arch, SM count), naming each field; OK for plans without a target line.
absl::Status CheckPlanTarget(const Plan& plan, const kernels::cuda::Target& device);
absl::StatusOr<Plan> ParsePlan(absl::string_view bytes, absl::string_view source_name);
absl::Status WritePlan(const Plan& plan, const std::string& path);
absl::StatusOr<Plan> ReadPlan(const std::string& path);
// `body` (a serialized plan up to its [end] line) with its xxh64 line appended, as SerializePlan
// ends every format-2 plan (tests that edit a plan's inside re-seal it with this).
std::string SealPlan(std::string body);
// Whether the file is a plan: it starts with the plan magic, or its name ends with .plan (a
// damaged one is then reported as a plan).
bool IsPlanFile(const std::string& path);

// Refuses a plan for another GGUF or, when `arch` is not empty, another target arch; the message
// says what differs. Runs before any device work.
absl::Status CheckPlanCompatible(const Plan& plan, const GgufIdentity& file, absl::string_view arch);

// Parses and verifies the plan's IR and checks it against the plan's layout section and, for a
// version-1 kernel table, that every kernel module an op names is there with a cubin for the
// plan's arch.
absl::StatusOr<std::unique_ptr<ir::Module>> LoadPlanModule(const Plan& plan);

// The architecture names `--arch` accepts: "cpu" or "sm_NN" / "sm_NNa".
bool IsValidArch(absl::string_view arch);

}  // namespace memra::runtime
