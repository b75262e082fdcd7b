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

struct uint2 {
  unsigned x, y;
};
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __clz(unsigned x) { return std::countl_zero(x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
template <class T>
T __shfl_up_sync(unsigned, T v, int d) {
  return emu_shfl(v, emu_lane >= d ? emu_lane - d : emu_lane);
}
inline unsigned __match_any_sync(unsigned, int v) {
  emu_warp->slot[emu_lane] = static_cast<uint32_t>(v);
  emu_warp->bar.arrive_and_wait();
  unsigned m = 0;
  for (int i = 0; i < 32; ++i) m |= (emu_warp->slot[i] == static_cast<uint32_t>(v) ? 1u : 0u) << i;
  emu_warp->bar.arrive_and_wait();
  return m;
}
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }

// cvt.rn.bf16.f32: round to nearest even (finite inputs).
inline unsigned short emu_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float emu_bf16_value(uint32_t word, int half) { return std::bit_cast<float>((word >> (16 * half)) << 16); }

// Per-warp exchange space (blocks run one at a time, so indexing by warp is enough).
struct MgEmuWarp {
  const unsigned char* addr[32];
  uint32_t a[32][4], b[32][2];
};
inline MgEmuWarp mg_emu_warps[32];

// ldmatrix.sync.aligned.m8n8.x4.b16: lane i gives the address of row i % 8 of matrix i / 8 (16
// bytes); lane l receives word l % 4 of row l / 4 of matrix q in r[q].
inline void mg_emu_ldmatrix_x4(uint32_t* r, const void* p) {
  MgEmuWarp& w = mg_emu_warps[threadIdx.x / 32];
  w.addr[emu_lane] = static_cast<const unsigned char*>(p);
  __syncwarp();
  for (int q = 0; q < 4; ++q) std::memcpy(&r[q], w.addr[8 * q + emu_lane / 4] + 4 * (emu_lane % 4), 4);
  __syncwarp();
}
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA fragment layouts; g = lane / 4,
// t = lane % 4, the lower-index element in the low half of a register): a0 (g, 2t..), a1 (g + 8,
// 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..); b0 (k 2t.., n g), b1 (k 2t + 8.., n g); d0, d1
// (g, 2t / 2t + 1), d2, d3 (g + 8, 2t / 2t + 1). The 16 products are exact; summed in double.
inline void mg_emu_mma(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  MgEmuWarp& w = mg_emu_warps[threadIdx.x / 32];
  for (int i = 0; i < 4; ++i) w.a[emu_lane][i] = a[i];
  w.b[emu_lane][0] = b0, w.b[emu_lane][1] = b1;
  __syncwarp();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = emu_bf16_value(w.a[l][0], h);
      A[g + 8][2 * t + h] = emu_bf16_value(w.a[l][1], h);
      A[g][2 * t + 8 + h] = emu_bf16_value(w.a[l][2], h);
      A[g + 8][2 * t + 8 + h] = emu_bf16_value(w.a[l][3], h);
      B[2 * t + h][g] = emu_bf16_value(w.b[l][0], h);
      B[2 * t + 8 + h][g] = emu_bf16_value(w.b[l][1], h);
    }
  }
  const int g = emu_lane / 4, t = emu_lane % 4;
  for (int q = 0; q < 4; ++q) {
    const int m = g + (q >> 1) * 8, n = 2 * t + (q & 1);
    double s = 0;
    for (int k = 0; k < 16; ++k) s += static_cast<double>(A[m][k]) * B[k][n];
    d[q] = static_cast<float>(d[q] + s);
  }
  __syncwarp();
}

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
