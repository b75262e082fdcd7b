// The `select-kernels` pass (listed in passes/Passes.def as a backend pass): kernel selection
// (codegen/KernelSelect.h) recorded on the IR, per op of every static function (the bucket
// functions @prefill_tN and @decode; functions with symbolic shapes are left alone):
//
//   %y = rms_norm(%x, @w) {kernels = ["Norm.cu<NORM_BLOCK=64,NORM_COLS=64>::rms_norm"],
//                          grid = [16], block = [64], smem = [0]} : f32[16, 64]
//   %m = matmul_swiglu(...) {gemm = 1, kernels = [...], ..., scratch_bytes = 4096}
//
//   kernels        "<ModuleSpec::Key()>::<entry>" per launch, in issue order
//   grid/block/smem  the launch geometry, parallel to `kernels`
//   gemm = 1       the op's products run on cuBLASLt
//   scratch_bytes  the executor's per-step scratch (ScratchFor): plan-memory places it
//
// Ops without launches (reshape, return, a cast to f32, take_last_row: the executor's copies
// and aliases) get no `kernels`. An op kind without a CUDA kernel is an error naming the op.
// Option `arch` (sm_NN, default sm_90) is recorded as the module attribute `kernel_arch`; the
// plan's kernel table (runtime/plan/KernelTable.h) compiles the named modules for it.
//
// Why it lives here and not in passes/: memra_codegen depends on memra_passes (the kernel
// catalogue sits above the IR passes), so memra_passes only declares the pass
// (MEMRA_BACKEND_PASS) and this library registers the factory: RegisterCodegenPasses(), which a
// static initializer in SelectKernelsPass.cc also runs whenever the object is linked (memra
// links it through tools/CompileCommand.cc, which calls RegisterCodegenPasses()).
#pragma once

#include <memory>

#include "passes/Pass.h"

namespace memra::codegen {

std::unique_ptr<passes::Pass> CreateSelectKernelsPass();
// Registers the codegen passes (select-kernels) with the pass registry; idempotent.
void RegisterCodegenPasses();

}  // namespace memra::codegen
