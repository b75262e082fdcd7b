// kernels/cuda/MoeGemm.cu compiled as host C++ over CudaHostEmulation.h (one std::thread per CUDA
// thread), for tests/cuda/emulation/moegemm_run.sh: the intrinsics MoeGemm.cu uses beyond
// GemvQuant.cu's, ldmatrix.x4 and mma.sync.m16n8k16 by their PTX definitions, and the modules the
// emulation runs, each in a namespace of its own, registered by module key and entry.
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/MoeGemmParams.h"
#include "kernels/cuda/MoeGemmTile.cuh"
#undef MG_BN  // each module below defines its own
#undef __CUDACC__
#include "tests/cuda/emulation/MoeGemmEmu.h"

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

float emu_half(unsigned short h);  // MoeGemmEmuMain.cc: formats::HalfToFloat
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

namespace {
std::map<std::string, MgEmuKernel>& Registry() {
  static std::map<std::string, MgEmuKernel> r;
  return r;
}
}  // namespace
MgEmuKernel MgEmuFind(const std::string& key) {
  auto it = Registry().find(key);
  return it == Registry().end() ? nullptr : it->second;
}

void MgEmuLaunch(const std::string& key, unsigned grid, unsigned block, const void* params) {
  emu_launch(MgEmuFind(key), grid, block, params);
}

// The modules, each in a namespace of its own, registered as "<module key>::<entry>".
#define MG_EMU_REGISTER(NS, KEY, ENTRY, PARAMS)                      \
  namespace NS {                                                     \
  void Run(const void* p) { ENTRY(*static_cast<const PARAMS*>(p)); } \
  const bool registered = (Registry()[KEY] = &Run, true);            \
  }

#define MS_E 4
#define MS_WARPS 32
#define moe_sort emu_sort_4
namespace emu_sort_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_sort
#undef MS_E
#undef MS_WARPS
MG_EMU_REGISTER(emu_sort_4_reg, "MoeGemm.cu<MS_E=4,MS_WARPS=32>::moe_sort", emu_sort_4_ns::emu_sort_4, MoeSortParams)

#define MS_E 8
#define MS_WARPS 32
#define moe_sort emu_sort_8
namespace emu_sort_8_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_sort
#undef MS_E
#undef MS_WARPS
MG_EMU_REGISTER(emu_sort_8_reg, "MoeGemm.cu<MS_E=8,MS_WARPS=32>::moe_sort", emu_sort_8_ns::emu_sort_8, MoeSortParams)

#define MS_E 256
#define MS_WARPS 32
#define moe_sort emu_sort_256
namespace emu_sort_256_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_sort
#undef MS_E
#undef MS_WARPS
MG_EMU_REGISTER(emu_sort_256_reg, "MoeGemm.cu<MS_E=256,MS_WARPS=32>::moe_sort", emu_sort_256_ns::emu_sort_256,
                MoeSortParams)

// The moe_gemm modules MoeGemmEmuMain.cc's cases launch, keyed as MoeGemm.h's launches spell them
// (a case whose module is missing fails with "no emulated module").
#define MG_TYPE 0
#define MG_SWIGLU 0
#define MG_BN 128
#define MG_CK 32
#define MG_CW 16
#define MG_ST 2
#define moe_gemm emu_gemm_0_0_128_32_16_2
namespace emu_gemm_0_0_128_32_16_2_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_0_0_128_32_16_2_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=32,MG_CW=16,MG_ST=2,MG_SWIGLU=0,MG_TYPE=0>::moe_gemm",
                emu_gemm_0_0_128_32_16_2_ns::emu_gemm_0_0_128_32_16_2, MoeGemmParams)

#define MG_TYPE 0
#define MG_SWIGLU 1
#define MG_BN 128
#define MG_CK 32
#define MG_CW 16
#define MG_ST 2
#define moe_gemm emu_gemm_0_1_128_32_16_2
namespace emu_gemm_0_1_128_32_16_2_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_0_1_128_32_16_2_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=32,MG_CW=16,MG_ST=2,MG_SWIGLU=1,MG_TYPE=0>::moe_gemm",
                emu_gemm_0_1_128_32_16_2_ns::emu_gemm_0_1_128_32_16_2, MoeGemmParams)

#define MG_TYPE 1
#define MG_SWIGLU 0
#define MG_BN 128
#define MG_CK 32
#define MG_CW 16
#define MG_ST 4
#define moe_gemm emu_gemm_1_0_128_32_16_4
namespace emu_gemm_1_0_128_32_16_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_1_0_128_32_16_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=32,MG_CW=16,MG_ST=4,MG_SWIGLU=0,MG_TYPE=1>::moe_gemm",
                emu_gemm_1_0_128_32_16_4_ns::emu_gemm_1_0_128_32_16_4, MoeGemmParams)

#define MG_TYPE 30
#define MG_SWIGLU 0
#define MG_BN 128
#define MG_CK 32
#define MG_CW 16
#define MG_ST 4
#define moe_gemm emu_gemm_30_0_128_32_16_4
namespace emu_gemm_30_0_128_32_16_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_30_0_128_32_16_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=32,MG_CW=16,MG_ST=4,MG_SWIGLU=0,MG_TYPE=30>::moe_gemm",
                emu_gemm_30_0_128_32_16_4_ns::emu_gemm_30_0_128_32_16_4, MoeGemmParams)

#define MG_TYPE 1
#define MG_SWIGLU 1
#define MG_BN 128
#define MG_CK 32
#define MG_CW 16
#define MG_ST 4
#define moe_gemm emu_gemm_1_1_128_32_16_4
namespace emu_gemm_1_1_128_32_16_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_1_1_128_32_16_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=32,MG_CW=16,MG_ST=4,MG_SWIGLU=1,MG_TYPE=1>::moe_gemm",
                emu_gemm_1_1_128_32_16_4_ns::emu_gemm_1_1_128_32_16_4, MoeGemmParams)

#define MG_TYPE 30
#define MG_SWIGLU 1
#define MG_BN 128
#define MG_CK 32
#define MG_CW 16
#define MG_ST 4
#define moe_gemm emu_gemm_30_1_128_32_16_4
namespace emu_gemm_30_1_128_32_16_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_30_1_128_32_16_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=32,MG_CW=16,MG_ST=4,MG_SWIGLU=1,MG_TYPE=30>::moe_gemm",
                emu_gemm_30_1_128_32_16_4_ns::emu_gemm_30_1_128_32_16_4, MoeGemmParams)

#define MG_TYPE 8
#define MG_SWIGLU 0
#define MG_BN 128
#define MG_CK 64
#define MG_CW 16
#define MG_ST 3
#define moe_gemm emu_gemm_8_0_128_64_16_3
namespace emu_gemm_8_0_128_64_16_3_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_8_0_128_64_16_3_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=16,MG_ST=3,MG_SWIGLU=0,MG_TYPE=8>::moe_gemm",
                emu_gemm_8_0_128_64_16_3_ns::emu_gemm_8_0_128_64_16_3, MoeGemmParams)

#define MG_TYPE 8
#define MG_SWIGLU 1
#define MG_BN 128
#define MG_CK 64
#define MG_CW 16
#define MG_ST 3
#define moe_gemm emu_gemm_8_1_128_64_16_3
namespace emu_gemm_8_1_128_64_16_3_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_8_1_128_64_16_3_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=16,MG_ST=3,MG_SWIGLU=1,MG_TYPE=8>::moe_gemm",
                emu_gemm_8_1_128_64_16_3_ns::emu_gemm_8_1_128_64_16_3, MoeGemmParams)

#define MG_TYPE 7
#define MG_SWIGLU 0
#define MG_BN 128
#define MG_CK 64
#define MG_CW 16
#define MG_ST 4
#define moe_gemm emu_gemm_7_0_128_64_16_4
namespace emu_gemm_7_0_128_64_16_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_7_0_128_64_16_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=16,MG_ST=4,MG_SWIGLU=0,MG_TYPE=7>::moe_gemm",
                emu_gemm_7_0_128_64_16_4_ns::emu_gemm_7_0_128_64_16_4, MoeGemmParams)

#define MG_TYPE 39
#define MG_SWIGLU 1
#define MG_BN 128
#define MG_CK 64
#define MG_CW 2
#define MG_ST 4
#define moe_gemm emu_gemm_39_1_128_64_2_4
namespace emu_gemm_39_1_128_64_2_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_39_1_128_64_2_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=2,MG_ST=4,MG_SWIGLU=1,MG_TYPE=39>::moe_gemm",
                emu_gemm_39_1_128_64_2_4_ns::emu_gemm_39_1_128_64_2_4, MoeGemmParams)

#define MG_TYPE 20
#define MG_SWIGLU 0
#define MG_BN 128
#define MG_CK 64
#define MG_CW 4
#define MG_ST 4
#define moe_gemm emu_gemm_20_0_128_64_4_4
namespace emu_gemm_20_0_128_64_4_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_20_0_128_64_4_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=4,MG_ST=4,MG_SWIGLU=0,MG_TYPE=20>::moe_gemm",
                emu_gemm_20_0_128_64_4_4_ns::emu_gemm_20_0_128_64_4_4, MoeGemmParams)

#define MG_TYPE 2
#define MG_SWIGLU 1
#define MG_BN 128
#define MG_CK 64
#define MG_CW 4
#define MG_ST 4
#define moe_gemm emu_gemm_2_1_128_64_4_4
namespace emu_gemm_2_1_128_64_4_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_2_1_128_64_4_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=4,MG_ST=4,MG_SWIGLU=1,MG_TYPE=2>::moe_gemm",
                emu_gemm_2_1_128_64_4_4_ns::emu_gemm_2_1_128_64_4_4, MoeGemmParams)

#define MG_TYPE 6
#define MG_SWIGLU 1
#define MG_BN 128
#define MG_CK 64
#define MG_CW 4
#define MG_ST 4
#define moe_gemm emu_gemm_6_1_128_64_4_4
namespace emu_gemm_6_1_128_64_4_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_6_1_128_64_4_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=4,MG_ST=4,MG_SWIGLU=1,MG_TYPE=6>::moe_gemm",
                emu_gemm_6_1_128_64_4_4_ns::emu_gemm_6_1_128_64_4_4, MoeGemmParams)

#define MG_TYPE 3
#define MG_SWIGLU 0
#define MG_BN 128
#define MG_CK 64
#define MG_CW 8
#define MG_ST 4
#define moe_gemm emu_gemm_3_0_128_64_8_4
namespace emu_gemm_3_0_128_64_8_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_3_0_128_64_8_4_reg,
                "MoeGemm.cu<MG_BN=128,MG_CK=64,MG_CW=8,MG_ST=4,MG_SWIGLU=0,MG_TYPE=3>::moe_gemm",
                emu_gemm_3_0_128_64_8_4_ns::emu_gemm_3_0_128_64_8_4, MoeGemmParams)

#define MG_TYPE 13
#define MG_SWIGLU 1
#define MG_BN 64
#define MG_CK 256
#define MG_CW 16
#define MG_ST 3
#define moe_gemm emu_gemm_13_1_64_256_16_3
namespace emu_gemm_13_1_64_256_16_3_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_13_1_64_256_16_3_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=16,MG_ST=3,MG_SWIGLU=1,MG_TYPE=13>::moe_gemm",
                emu_gemm_13_1_64_256_16_3_ns::emu_gemm_13_1_64_256_16_3, MoeGemmParams)

#define MG_TYPE 12
#define MG_SWIGLU 0
#define MG_BN 64
#define MG_CK 256
#define MG_CW 16
#define MG_ST 4
#define moe_gemm emu_gemm_12_0_64_256_16_4
namespace emu_gemm_12_0_64_256_16_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_12_0_64_256_16_4_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=16,MG_ST=4,MG_SWIGLU=0,MG_TYPE=12>::moe_gemm",
                emu_gemm_12_0_64_256_16_4_ns::emu_gemm_12_0_64_256_16_4, MoeGemmParams)

#define MG_TYPE 12
#define MG_SWIGLU 1
#define MG_BN 64
#define MG_CK 256
#define MG_CW 16
#define MG_ST 4
#define moe_gemm emu_gemm_12_1_64_256_16_4
namespace emu_gemm_12_1_64_256_16_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_12_1_64_256_16_4_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=16,MG_ST=4,MG_SWIGLU=1,MG_TYPE=12>::moe_gemm",
                emu_gemm_12_1_64_256_16_4_ns::emu_gemm_12_1_64_256_16_4, MoeGemmParams)

#define MG_TYPE 14
#define MG_SWIGLU 0
#define MG_BN 64
#define MG_CK 256
#define MG_CW 2
#define MG_ST 2
#define moe_gemm emu_gemm_14_0_64_256_2_2
namespace emu_gemm_14_0_64_256_2_2_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_14_0_64_256_2_2_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=2,MG_ST=2,MG_SWIGLU=0,MG_TYPE=14>::moe_gemm",
                emu_gemm_14_0_64_256_2_2_ns::emu_gemm_14_0_64_256_2_2, MoeGemmParams)

#define MG_TYPE 14
#define MG_SWIGLU 1
#define MG_BN 64
#define MG_CK 256
#define MG_CW 2
#define MG_ST 2
#define moe_gemm emu_gemm_14_1_64_256_2_2
namespace emu_gemm_14_1_64_256_2_2_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_14_1_64_256_2_2_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=2,MG_ST=2,MG_SWIGLU=1,MG_TYPE=14>::moe_gemm",
                emu_gemm_14_1_64_256_2_2_ns::emu_gemm_14_1_64_256_2_2, MoeGemmParams)

#define MG_TYPE 11
#define MG_SWIGLU 1
#define MG_BN 64
#define MG_CK 256
#define MG_CW 2
#define MG_ST 4
#define moe_gemm emu_gemm_11_1_64_256_2_4
namespace emu_gemm_11_1_64_256_2_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_11_1_64_256_2_4_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=2,MG_ST=4,MG_SWIGLU=1,MG_TYPE=11>::moe_gemm",
                emu_gemm_11_1_64_256_2_4_ns::emu_gemm_11_1_64_256_2_4, MoeGemmParams)

#define MG_TYPE 10
#define MG_SWIGLU 0
#define MG_BN 64
#define MG_CK 256
#define MG_CW 4
#define MG_ST 4
#define moe_gemm emu_gemm_10_0_64_256_4_4
namespace emu_gemm_10_0_64_256_4_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_10_0_64_256_4_4_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=4,MG_ST=4,MG_SWIGLU=0,MG_TYPE=10>::moe_gemm",
                emu_gemm_10_0_64_256_4_4_ns::emu_gemm_10_0_64_256_4_4, MoeGemmParams)

#define MG_TYPE 23
#define MG_SWIGLU 0
#define MG_BN 64
#define MG_CK 256
#define MG_CW 8
#define MG_ST 4
#define moe_gemm emu_gemm_23_0_64_256_8_4
namespace emu_gemm_23_0_64_256_8_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_23_0_64_256_8_4_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=8,MG_ST=4,MG_SWIGLU=0,MG_TYPE=23>::moe_gemm",
                emu_gemm_23_0_64_256_8_4_ns::emu_gemm_23_0_64_256_8_4, MoeGemmParams)

#define MG_TYPE 23
#define MG_SWIGLU 1
#define MG_BN 64
#define MG_CK 256
#define MG_CW 8
#define MG_ST 4
#define moe_gemm emu_gemm_23_1_64_256_8_4
namespace emu_gemm_23_1_64_256_8_4_ns {
#include "kernels/cuda/MoeGemm.cu"
}
#undef moe_gemm
#undef MG_TYPE
#undef MG_SWIGLU
#undef MG_BN
#undef MG_CK
#undef MG_CW
#undef MG_ST
#undef MG_WIDE
#undef MG_QK
#undef MG_BB
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
#undef MG_SEG
#undef MG_LOW
#undef MG_G
#undef MG_MAXP
#undef MG_SEGP
#undef MG_AV
#undef MG_WV
MG_EMU_REGISTER(emu_gemm_23_1_64_256_8_4_reg,
                "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=8,MG_ST=4,MG_SWIGLU=1,MG_TYPE=23>::moe_gemm",
                emu_gemm_23_1_64_256_8_4_ns::emu_gemm_23_1_64_256_8_4, MoeGemmParams)
