// Kernel instances and their compilation.
//
// A kernel instance is (source template, specialization constants, launch geometry): the
// template is one kernels/cuda/*.cu file, the constants are preprocessor defines baked in by
// NVRTC (hidden size, head counts, head dim, the token bucket where the code depends on it), the
// geometry is chosen by the GPU op units (kernels/cuda/GpuOp.h). A module = one file compiled with one set of
// defines (all its `extern "C"` entries); modules are what gets compiled and cached.
//
// KernelCompiler compiles modules with NVRTC for one architecture (sm_90 on the H200; sm_90a
// where a template uses wgmma), keeps an on-disk cubin cache keyed by a hash of source, headers,
// options, arch and NVRTC version (default ~/.cache/memra, overridable by options; each entry
// carries its xxHash64, so a truncated or altered one is compiled again, never loaded), compiles
// the misses in parallel on all cores, and counts hits, compiles and compile time. Cubins
// compiled ahead of time (a plan's kernel table) can be seeded with AddPrecompiled: CompileAll
// takes them before the disk cache and NVRTC.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/KernelSpec.h"

namespace memra::codegen {

// Kernel instances are defined beside the kernels (kernels/cuda/KernelSpec.h).
using kernels::cuda::Def;
using kernels::cuda::Defines;
using kernels::cuda::KernelSpec;
using kernels::cuda::MakeDefines;
using kernels::cuda::ModuleSpec;

// Precompiled cubins by module key (ModuleSpec::Key()), e.g. a plan's kernel table.
using CubinBytes = std::shared_ptr<const std::vector<uint8_t>>;
using PrecompiledCubins = std::map<std::string, CubinBytes>;

// Hash (hex) of what a module's code is made of: its source file, the kernel headers and its
// defines -- no NVRTC version or arch. A plan records it so a memra whose embedded kernel sources
// changed refuses the plan's cubins instead of running stale code.
absl::StatusOr<std::string> ModuleSourceHash(const ModuleSpec& m);

struct CompileOptions {
  int arch = 90;              // sm_XX
  std::string cache_dir;      // empty: DefaultCacheDir(); "-" disables the disk cache
  int jobs = 0;               // parallel compiles; 0: all cores
  std::string nvrtc_library;  // empty: default search
  std::vector<std::string> extra_options;
  // Fault injection (CudaExecutorOptions::fail_compile): the nth NVRTC compile (1-based) fails as
  // a compiler error would; 0: none.
  int fail_compile_at = 0;
};

struct CompileStats {
  int64_t requested = 0;       // modules asked for (deduplicated)
  int64_t memory_hits = 0;     // already compiled in this process
  int64_t plan_hits = 0;       // seeded by AddPrecompiled (a plan's kernel table)
  int64_t disk_hits = 0;       // read from the cache dir
  int64_t compiled = 0;        // compiled by NVRTC
  double compile_seconds = 0;  // summed NVRTC time of the compiled modules
  double wall_seconds = 0;     // wall time of CompileAll calls
  std::string ToString() const;
};

class KernelCompiler {
 public:
  static absl::StatusOr<std::unique_ptr<KernelCompiler>> Create(const CompileOptions& options);
  // $HOME/.cache/memra (or /tmp/memra-cache when HOME is unset).
  static std::string DefaultCacheDir();

  // Compiles (or finds) every module; returns cubins in order. All compile errors are reported
  // together, each naming the module.
  absl::StatusOr<std::vector<std::shared_ptr<const std::vector<uint8_t>>>> CompileAll(
      const std::vector<ModuleSpec>& modules);

  // Seeds the cubin of module `key` (ModuleSpec::Key()), compiled ahead of time for this
  // compiler's arch: CompileAll returns it without touching the disk cache or NVRTC.
  void AddPrecompiled(const std::string& key, CubinBytes cubin);
  void AddPrecompiled(const PrecompiledCubins& cubins);

  const CompileStats& stats() const { return stats_; }
  const CompileOptions& options() const { return options_; }
  std::string nvrtc_version() const;
  // The NVRTC options a module is compiled with.
  std::vector<std::string> OptionsFor(const ModuleSpec& m) const;
  // The cache key (hex) of a module: hash of sources + options + arch + NVRTC version.
  absl::StatusOr<std::string> CacheKey(const ModuleSpec& m) const;

 private:
  KernelCompiler() = default;
  absl::StatusOr<std::shared_ptr<const std::vector<uint8_t>>> CompileOne(const ModuleSpec& m, double* seconds,
                                                                         bool* disk_hit);
  CompileOptions options_;
  const class Nvrtc* nvrtc_ = nullptr;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const std::vector<uint8_t>>> memory_;
  PrecompiledCubins precompiled_;
  CompileStats stats_;
  std::atomic<int> compiles_started_{0};  // for options_.fail_compile_at
};

}  // namespace memra::codegen
