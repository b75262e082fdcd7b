// The plan's kernel table (version 1, runtime/plan/Plan.h): which kernel modules a compiled
// module needs, their cubins, and the checks between the table and the IR.
//
// The modules come from kernel selection over every static function (the bucket functions and
// @decode, at their `bucket`): codegen::ModulesForFunction, the same selection the select-kernels
// pass records in the ops' `kernels` attributes (checked to agree) and the CUDA executor issues.
// Compiling needs NVRTC (dlopened, codegen/Nvrtc) but no GPU; codegen::KernelCompiler compiles
// the misses in parallel and honours its disk cache. At run time PrecompiledKernels turns a
// loaded plan's table into the map CudaExecutorOptions::precompiled seeds the compiler with.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/KernelCompiler.h"
#include "ir/Module.h"
#include "runtime/plan/Plan.h"

namespace memra::runtime {

// "sm_90" -> 90, "sm_90a" -> 90 (the -arch number); error otherwise.
absl::StatusOr<int> ArchNumber(absl::string_view arch);

// Every kernel module the static functions of `module` select (deduplicated, in first-use order),
// after checking that the ops' `kernels` attributes (select-kernels) name only these modules.
absl::StatusOr<std::vector<codegen::ModuleSpec>> KernelModulesOf(const ir::Module& module);

// Compiles KernelModulesOf(module) for `arch` (sm_NN) into a version-1 table. `options.arch` is
// taken from `arch`; the rest (cache dir, jobs, NVRTC library) as given.
absl::StatusOr<KernelTable> BuildKernelTable(const ir::Module& module, absl::string_view arch,
                                             codegen::CompileOptions options = {});

// Every kernel module an op of `module` names (its `kernels` attribute, "KEY::entry") must be in
// the table with a cubin for `arch`; the error names the kernel and the op.
absl::Status CheckKernelTable(const KernelTable& table, const ir::Module& module, absl::string_view arch);

// The plan's cubins for its arch, by module key, for CudaExecutorOptions::precompiled. Refuses a
// kernel whose source hash differs from this memra's embedded kernels (the plan's cubin would run
// older code; recompile the plan). An empty map for a version-0 table.
absl::StatusOr<std::shared_ptr<const codegen::PrecompiledCubins>> PrecompiledKernels(const Plan& plan);

}  // namespace memra::runtime
