// The tensor-core instructions memra's mma.sync kernels use (MoeGemm.cu, FlashAttention.cu), by
// their PTX ISA definitions, over CudaHostEmulation.h (include that first): ldmatrix (plain and
// transposed) and mma.sync m16n8k16 bf16 with f32 accumulation; and cvt.rn.bf16.f32.
#pragma once
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

inline float emu_bf16_value(uint32_t word, int half) { return std::bit_cast<float>((word >> (16 * half)) << 16); }

// Per-warp exchange space (blocks run one at a time, so indexing by warp is enough).
struct EmuMmaWarp {
  const unsigned char* addr[32];
  uint32_t a[32][4], b[32][2];
};
inline EmuMmaWarp emu_mma_warps[32];

// ldmatrix.sync.aligned.m8n8.x4.b16: lane i gives the address of row i % 8 of matrix i / 8 (16
// bytes); lane l receives word l % 4 of row l / 4 of matrix q in r[q].
inline void emu_ldmatrix_x4(uint32_t* r, const void* p) {
  EmuMmaWarp& w = emu_mma_warps[threadIdx.x / 32];
  w.addr[emu_lane] = static_cast<const unsigned char*>(p);
  __syncwarp();
  for (int q = 0; q < 4; ++q) std::memcpy(&r[q], w.addr[8 * q + emu_lane / 4] + 4 * (emu_lane % 4), 4);
  __syncwarp();
}
// ldmatrix.sync.aligned.m8n8.x4.trans.b16: the same rows, each 8 x 8 matrix transposed: lane l
// receives elements (row 2 (l % 4), column l / 4) in the low half and (row 2 (l % 4) + 1, the same
// column) in the high half of r[q].
inline void emu_ldmatrix_x4_trans(uint32_t* r, const void* p) {
  EmuMmaWarp& w = emu_mma_warps[threadIdx.x / 32];
  w.addr[emu_lane] = static_cast<const unsigned char*>(p);
  __syncwarp();
  for (int q = 0; q < 4; ++q) {
    uint16_t lo, hi;
    std::memcpy(&lo, w.addr[8 * q + 2 * (emu_lane % 4)] + 2 * (emu_lane / 4), 2);
    std::memcpy(&hi, w.addr[8 * q + 2 * (emu_lane % 4) + 1] + 2 * (emu_lane / 4), 2);
    r[q] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  __syncwarp();
}
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA fragment layouts; g = lane / 4,
// t = lane % 4, the lower-index element in the low half of a register): a0 (g, 2t..), a1 (g + 8,
// 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..); b0 (k 2t.., n g), b1 (k 2t + 8.., n g); d0, d1
// (g, 2t / 2t + 1), d2, d3 (g + 8, 2t / 2t + 1). The 16 products are exact; summed in double.
inline void emu_mma_bf16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  EmuMmaWarp& w = emu_mma_warps[threadIdx.x / 32];
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

// wgmma.mma_async (m64nNk16, bf16 in, f32 accumulation) by the PTX ISA's shared-memory matrix
// layouts with 128-byte swizzling ("Shared Memory Matrix Layout", kernels/cuda/Wgmma.cuh): a
// descriptor's start address, LBO and SBO (bits 0-13, 16-29, 32-45, each >> 4) locate element
// (row, k) of a K-major operand at start + (row / 8) SBO + (row % 8) 128 + 2k, and element (k, n)
// of an N-major B at start + (n / 64) LBO + 2 (n % 64) + (k / 8) SBO + (k % 8) 128; the swizzle
// then XORs address bits 4-6 with bits 7-9. Shared addresses are offsets from the kernel's aligned
// shared memory (emu_wg_set_base). The product is performed at once (the emulation has no async
// proxy), each thread computing its own accumulator fragment (mma.sync's per warp of the group).
inline unsigned char* emu_wg_base = nullptr;
inline unsigned char* emu_wg_set_base(unsigned char* p) {
  emu_wg_base = p;
  return p;
}
// A descriptor holds 18 bits of a shared address: an offset past them is a kernel's error.
inline uint32_t emu_wg_addr(const void* p) {
  const auto a = static_cast<uint64_t>(static_cast<const unsigned char*>(p) - emu_wg_base);
  if (a >= (1u << 18)) std::abort();
  return static_cast<uint32_t>(a);
}
struct EmuWgGroup {
  uint32_t a[128][4];
};
inline EmuWgGroup emu_wg_groups[8];
inline float emu_wg_load(uint32_t addr) {
  addr ^= ((addr >> 7) & 7u) << 4;
  uint16_t h;
  std::memcpy(&h, emu_wg_base + addr, 2);
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}
inline void emu_wgmma(float* d, int N, uint64_t desc_a, const uint32_t* a_regs, uint64_t desc_b, bool b_n_major,
                      int scale_d) {
  auto field = [](uint64_t desc, int shift) { return static_cast<uint32_t>((desc >> shift) & 0x3fffu) << 4; };
  if ((desc_b >> 62) != 1 || (a_regs == nullptr && (desc_a >> 62) != 1)) std::abort();  // 128-byte swizzle only
  const int tid = static_cast<int>(threadIdx.x % 128), warp = tid / 32;
  EmuWgGroup& grp = emu_wg_groups[threadIdx.x / 128];
  if (a_regs != nullptr)
    for (int i = 0; i < 4; ++i) grp.a[tid][i] = a_regs[i];
  emu_wg_bar->arrive_and_wait();
  auto A = [&](int m, int k) -> float {
    if (a_regs == nullptr) return emu_wg_load(field(desc_a, 0) + (m / 8) * field(desc_a, 32) + (m % 8) * 128 + 2 * k);
    // The register fragment of warp m / 16: a0 (g, 2t..), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3
    // (g + 8, 2t + 8..).
    const int w = m / 16, r = m % 16, g = r % 8, t = (k % 8) / 2;
    const int reg = (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    return emu_bf16_value(grp.a[32 * w + 4 * g + t][reg], k % 2);
  };
  auto B = [&](int k, int n) -> float {
    const uint32_t start = field(desc_b, 0), lbo = field(desc_b, 16), sbo = field(desc_b, 32);
    if (!b_n_major) return emu_wg_load(start + (n / 8) * sbo + (n % 8) * 128 + 2 * k);
    return emu_wg_load(start + (n / 64) * lbo + 2 * (n % 64) + (k / 8) * sbo + (k % 8) * 128);
  };
  const int g = emu_lane / 4, t = emu_lane % 4;
  for (int i = 0; i < N / 8; ++i)
    for (int e = 0; e < 4; ++e) {
      const int m = 16 * warp + g + (e >> 1) * 8, n = 8 * i + 2 * t + (e & 1);
      double s = 0;
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A(m, k)) * B(k, n);
      d[4 * i + e] = static_cast<float>((scale_d ? d[4 * i + e] : 0.0f) + s);
    }
  emu_wg_bar->arrive_and_wait();
}

// mbarrier (kernels/cuda/Wgmma.cuh wg_mbar_*): the 64-bit word holds arrivals (bits 0-31), the
// phase parity (bit 32) and the expected count (bits 33-63).
inline void emu_mbar_arrive(unsigned long long* bar) {
  std::atomic_ref<unsigned long long> w(*bar);
  unsigned long long cur = w.load();
  for (;;) {
    const unsigned long long count = cur >> 33, arrivals = (cur & 0xffffffffu) + 1;
    const unsigned long long next = arrivals == count ? ((cur >> 32) ^ 1u) << 32 : (cur & ~0xffffffffull) | arrivals;
    if (w.compare_exchange_weak(cur, next)) return;
  }
}
inline void emu_mbar_wait(unsigned long long* bar, uint32_t parity) {
  std::atomic_ref<unsigned long long> w(*bar);
  while (((w.load() >> 32) & 1u) == parity) std::this_thread::yield();
}
