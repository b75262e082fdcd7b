// One kernels/cuda/MoeGemm.cu module compiled as host C++ over CudaHostEmulation.h (one
// std::thread per CUDA thread), for moegemm_run.sh, which compiles this file once per module key
// MoeGemmEmuMain.cc's cases need (`--list`): the key's -D constants (MS_* for moe_sort, MG_* for
// moe_gemm), MG_EMU_KEY (the key itself) and an EMU_ID naming the module's namespace and entries.
// Registers "<module key>::<entry>" for every entry the module has (MoeGemmEmuLaunch.cc holds the
// registry). Beside the module: the intrinsics MoeGemm.cu uses beyond GemvQuant.cu's, ldmatrix.x4
// and mma.sync.m16n8k16 by their PTX definitions.
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/MoeGemmParams.h"
#include "kernels/cuda/MoeGemmTile.cuh"
#undef __CUDACC__
#include "tests/cuda/emulation/MmaEmulation.h"

inline int __popc(unsigned x) { return std::popcount(x); }
inline int __clz(unsigned x) { return std::countl_zero(x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline unsigned __match_any_sync(unsigned, int v) {
  emu_warp->slot[emu_lane] = static_cast<uint32_t>(v);
  emu_warp->bar.arrive_and_wait();
  unsigned m = 0;
  for (int i = 0; i < 32; ++i) m |= (emu_warp->slot[i] == static_cast<uint32_t>(v) ? 1u : 0u) << i;
  emu_warp->bar.arrive_and_wait();
  return m;
}
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }

// ldmatrix and mma.sync by their PTX definitions (MmaEmulation.h).
#define mg_emu_ldmatrix_x4 emu_ldmatrix_x4
#define mg_emu_mma emu_mma_bf16

#define MG_HOST_EMULATION 1
#define f16_to_f32 emu_half
#define f32_to_bf16 emu_bf16
#define EMU_PASTE2(a, b) a##b
#define EMU_PASTE(a, b) EMU_PASTE2(a, b)
#define moe_sort EMU_PASTE(emu_moe_sort_, EMU_ID)
#define moe_gemm EMU_PASTE(emu_moe_gemm_, EMU_ID)
namespace EMU_PASTE(emu_ns_, EMU_ID) {
#include "kernels/cuda/MoeGemm.cu"
}
namespace {
using namespace EMU_PASTE(emu_ns_, EMU_ID);
#ifdef MS_E
void Sort(const void* p) { moe_sort(*static_cast<const MoeSortParams*>(p)); }
const int sort_reg = (emu_register(MG_EMU_KEY "::moe_sort", &Sort), 0);
#endif
#ifdef MG_TYPE
void Gemm(const void* p) { moe_gemm(*static_cast<const MoeGemmParams*>(p)); }
const int gemm_reg = (emu_register(MG_EMU_KEY "::moe_gemm", &Gemm), 0);
#endif
}  // namespace
