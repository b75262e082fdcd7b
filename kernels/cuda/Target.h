// The GPU a selection is made for: every grid, split and shared-memory decision of the op units
// (kernels/cuda/*.cc) reads these facts instead of constants. Read from the device when there is
// one (runtime/cuda/CudaDevice::target()), from a named preset otherwise (`memra compile --arch
// sm_90`: H100/H200). select-kernels records the fields a selection depends on; a plan records
// the whole target, and `memra run` refuses a plan whose selection fields differ from the device's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::kernels::cuda {

struct Target {
  std::string name;    // the device's name, or the preset's ("H100/H200")
  int arch = 90;       // compute capability major * 10 + minor
  int sm_count = 132;  // streaming multiprocessors
  int max_threads_per_block = 1024;
  int warp_size = 32;
  int64_t smem_per_block = 48 << 10;  // static + default dynamic limit
  int64_t smem_per_block_optin = 0;   // with cuFuncSetAttribute
  int64_t smem_per_sm = 0;
  int64_t l2_bytes = 0;
  int max_cluster_blocks = 1;  // portable thread-block cluster size (1: no clusters)
  int64_t memory_bytes = 0;    // device memory; 0 = unknown (a preset)
  // Roofline ceilings (memra bench --profile's "% of roofline"): device-memory read bandwidth in
  // GB/s and the dense bf16 tensor-core rate in TFLOP/s. Measured figures for devices we have
  // measured (MeasuredCeilings), else the data sheet's from the device's attributes; 0 = unknown.
  int64_t mem_gbps = 0;
  int64_t bf16_tflops = 0;

  std::string ArchName() const;  // "sm_90"
  // One line, `key=value` pairs (the plan header's `target` line); Parse reads it back.
  std::string Serialize() const;
  static absl::StatusOr<Target> Parse(absl::string_view line);
};

// Dense bf16 tensor-core FLOPs per clock per SM of an architecture (data sheets: A100 2,048,
// L40S 1,024, H100 4,096); 0 for one not in the table.
int64_t Bf16FlopsPerClockPerSm(int arch);
// The ceilings measured on a device of this name (docs/design h200-measurements.md: the H200's
// streaming read and bf16 GEMM rates), or false.
bool MeasuredCeilings(absl::string_view device_name, int64_t* mem_gbps, int64_t* bf16_tflops);

// A named preset: "sm_90" / "sm_90a" (H100 / H200 SXM), "sm_89" (L40S), "sm_80" (A100 SXM).
// Errors list the presets.
absl::StatusOr<Target> TargetPreset(absl::string_view arch);
// memra's CUDA kernels use sm_90's bulk tensor copies, mbarriers and thread-block clusters (and
// wgmma): FailedPrecondition naming the target for any other. The other presets stay for
// planning and tests of the selection.
absl::Status CheckKernelsSupport(const Target& t);
std::vector<std::string> TargetPresetNames();

// The fields kernel selection reads (arch, sm_count): a selection made for `compiled` is valid on
// `device` only when they agree. Returns "field: compiled X, device Y" per difference.
std::vector<std::string> SelectionMismatches(const Target& compiled, const Target& device);

}  // namespace memra::kernels::cuda
