// The plan file: everything `memra run` needs to start without compiling, in one file.
//
//   MEMRAPLAN 1                                  magic and format version
//   [header] bytes=N                             key = value lines: format_version, memra_version,
//                                                arch, pipeline, gguf_path, gguf_size,
//                                                gguf_header_sha256
//   [ir] bytes=N                                 the final IR text (ir/Printer.h), which also
//                                                carries the arena offsets and the segments
//   [layout] bytes=N                             per function (bucket): arena size, naive size,
//                                                alignment, every buffer, every segment (a
//                                                readable summary, checked against the IR at load)
//   [kernels] version=0 bytes=N                  the kernel table: per kernel its name,
//                                                specialization constants, NVRTC source hash and
//                                                one cubin per arch. Version 0 = empty: the CUDA
//                                                backend fills it (codegen), the CPU ignores it.
//   [end]
//
// Every section gives its byte length, so binary payloads (cubins) need no escaping. A reader
// refuses other magic, a newer format version, unknown kernel-table versions, truncation, and a
// layout that disagrees with the IR. The GGUF identity is its size and the SHA-256 of its header
// (metadata and tensor table: names, types, shapes, offsets); the path is recorded to find the
// file, but a copy elsewhere with the same identity is accepted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::runtime {

inline constexpr int kPlanFormatVersion = 1;
// The kernel table's own version: 0 = no kernels yet (the CUDA backend defines version 1).
inline constexpr int kKernelTableVersion = 0;

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
  std::string value;           // the value's printed name (without '%')
  int64_t offset = 0;
  int64_t bytes = 0;           // 0 for an alias
  std::string alias_of;        // root value of a reshape alias, else ""
};

struct PlanSegment {
  bool capturable = false;
  int64_t ops = 0;
  bool kv_rung = false;
  std::string reason;          // eager: why; capturable: why it ends
};

struct PlanFunction {
  std::string name;
  int64_t bucket = 0;          // 0: none
  int64_t arena_bytes = 0;     // 0 with no memory plan
  int64_t naive_bytes = 0;
  int64_t alignment = 0;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanSegment> segments;
  bool operator==(const PlanFunction& o) const;
};

struct KernelBinary {
  std::string arch;            // "sm_90"
  std::string cubin;           // bytes
};
struct KernelEntry {
  std::string name;            // kernel entry point
  std::string constants;       // specialization constants, "K=V;K=V"
  std::string source_hash;     // NVRTC source + options hash
  std::vector<KernelBinary> binaries;
};
struct KernelTable {
  int version = kKernelTableVersion;
  std::vector<KernelEntry> kernels;
};

// The CUDA backend's hook for the kernel table: kernel selection per op and bucket (the
// `select-kernels` step of the design; codegen/KernelSelect.h) and NVRTC compilation for `arch`,
// over the compiled module. Registered by the backend (codegen) with SetKernelTableBuilder;
// while none is registered, or for arch "cpu", `memra compile` writes an empty table (version 0).
using KernelTableBuilder = absl::StatusOr<KernelTable> (*)(const ir::Module& module, absl::string_view arch);
void SetKernelTableBuilder(KernelTableBuilder builder);
KernelTableBuilder GetKernelTableBuilder();

struct Plan {
  int format_version = kPlanFormatVersion;
  std::string memra_version;
  std::string arch;            // "sm_90", or "cpu"
  std::string pipeline;        // the pipeline that produced the IR
  GgufIdentity gguf;
  std::string ir_text;
  std::vector<PlanFunction> functions;
  KernelTable kernels;
};

// The per-function layout recorded in a compiled module's attributes (plan-memory,
// partition-segments). Value names are those the printer gives (unique per function).
absl::StatusOr<std::vector<PlanFunction>> DescribeFunctions(const ir::Module& module);

// A plan for `module` compiled from `file` (with the kernel table of the registered
// KernelTableBuilder, if any, built over the module as the plan's IR text reads back).
absl::StatusOr<Plan> MakePlan(const ir::Module& module, const gguf::GgufFile& file, absl::string_view arch,
                              absl::string_view pipeline, absl::string_view memra_version);

std::string SerializePlan(const Plan& plan);
absl::StatusOr<Plan> ParsePlan(absl::string_view bytes, absl::string_view source_name);
absl::Status WritePlan(const Plan& plan, const std::string& path);
absl::StatusOr<Plan> ReadPlan(const std::string& path);
// Whether the file starts with the plan magic.
bool IsPlanFile(const std::string& path);

// Refuses a plan for another GGUF or, when `arch` is not empty, another target arch; the message
// says what differs. Runs before any device work.
absl::Status CheckPlanCompatible(const Plan& plan, const GgufIdentity& file, absl::string_view arch);

// Parses and verifies the plan's IR and checks it against the plan's layout section.
absl::StatusOr<std::unique_ptr<ir::Module>> LoadPlanModule(const Plan& plan);

// The architecture names `--arch` accepts: "cpu" or "sm_NN" / "sm_NNa".
bool IsValidArch(absl::string_view arch);

}  // namespace memra::runtime
