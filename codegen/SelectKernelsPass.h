// The `select-kernels` pass (listed in passes/Passes.def as a backend pass): the GPU op units'
// selection (kernels/cuda/GpuOpRegistry.h) recorded on the IR, per op of every static function
// (the bucket functions @prefill_tN and @decode; functions with symbolic shapes are left alone):
//
//   %y = rms_norm(%x, @w) {block = [64], grid = [16], impl = "row_norm",
//                          kernels = ["Norm.cu<NORM_BLOCK=64,NORM_COLS=64>::rms_norm"], smem = [0]}
//   %m = matmul_swiglu(...) {gemm = 1, impl = "gemm_swiglu", kernels = [...], ..., scratch_bytes = 4096}
//
//   impl           the unit (kernels/cuda/GpuOps.def) the executor binds the record with
//   kernels        "<ModuleSpec::Key()>::<entry>" per launch, in issue order
//   grid/block/smem  the launch geometry, parallel to `kernels`
//   gemm = 1       the op's products run on cuBLASLt; gemv = 1: on Gemv.cu
//   scratch_bytes  the unit's per-step scratch: plan-memory places it
//   workspace_bytes  the unit's share of the executor's one workspace (a matrix in blocks
//                  dequantized to bf16 for its product); not in the arena
//
// Ops that only alias memory (reshape, return, a cast to f32) get no record. An op kind without a
// CUDA unit is an error naming the op. Options `arch` (a target preset, default sm_90) and
// `sm-count` (0: the preset's; memra run passes the device's) pick the target; its selection
// fields are recorded as the module attributes `kernel_arch` and `kernel_sm_count`, which the
// executor checks against the device. Option `weights` (blocks, the default, or bf16: how
// block-format matrices are held, kernels/cuda/WeightLayout.h) is recorded as `kernel_weights`;
// a matrix whose type has no layout in that mode is an error naming it (and --weights bf16).
// Option `decode-class` (bucket, the default, or exact: kernels/cuda/DecodeClass.h) is recorded as
// `decode_class`; exact runs the 16-bit GEMVs at every T <= 8 (GEMV_T, each token's arithmetic that
// of one) and refuses q8-companions. The plan's kernel table
// (runtime/plan/KernelTable.h) compiles the named modules.
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
