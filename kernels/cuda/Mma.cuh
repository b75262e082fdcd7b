// Tensor-core and async-copy helpers of the mma.sync kernels (FlashAttention.cu,
// DeltaNetChunked.cu): ldmatrix (plain and transposed), mma.sync m16n8k16 bf16 with f32
// accumulation, bf16 packing, cp.async. Under MEMRA_MMA_HOST_EMULATION they map to the host
// emulation's definitions (tests/cuda/emulation/MmaEmulation.h, CudaHostEmulation.h).
#pragma once
#include "Common.cuh"

typedef unsigned int u32;

#if defined(MEMRA_MMA_HOST_EMULATION)
__device__ __forceinline__ void mma_ldmatrix_x4(u32* r, const void* p) { emu_ldmatrix_x4(r, p); }
__device__ __forceinline__ void mma_ldmatrix_x4_trans(u32* r, const void* p) { emu_ldmatrix_x4_trans(r, p); }
__device__ __forceinline__ void mma_bf16(float* d, const u32* a, u32 b0, u32 b1) { emu_mma_bf16(d, a, b0, b1); }
__device__ __forceinline__ void mma_cp_async16(void* dst, const void* src) { gq_emu_copy(dst, src, 16); }
__device__ __forceinline__ void mma_cp_commit() { gq_emu_commit(); }
template <int N>
__device__ __forceinline__ void mma_cp_wait() {
  gq_emu_wait(N);
}
#else
__device__ __forceinline__ u32 mma_smem_addr(const void* p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
// Lane l gives the address of row l % 8 of matrix l / 8 (16 bytes each); lane l receives word
// l % 4 of row l / 4 of matrix q in r[q] (.trans: the 8 x 8 matrices transposed).
__device__ __forceinline__ void mma_ldmatrix_x4(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(mma_smem_addr(p)));
}
__device__ __forceinline__ void mma_ldmatrix_x4_trans(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(mma_smem_addr(p)));
}
// d += a (16 x 16, row) * b (16 x 8, col), bf16 in, f32 accumulation.
__device__ __forceinline__ void mma_bf16(float* d, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(mma_smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void mma_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void mma_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

// Bulk copies (cp.async.bulk: the copy engine moves a whole row, so a lane issues one instruction
// per row, not one per 16 bytes) completing on an mbarrier. The issuing thread's
// mma_bar_arrive_expect(bar, bytes) announces the stage's bytes (init count 1); mma_bar_wait waits
// for the phase of the given parity. Under the host emulation a bulk copy is a deferred copy of
// the issuing thread (committed by mma_bulk_commit, performed by its mma_bulk_wait), so a read
// before the wait sees stale data there too.
#if defined(MEMRA_MMA_HOST_EMULATION)
__device__ __forceinline__ void mma_bar_init(u32*, unsigned) {}
__device__ __forceinline__ void mma_bar_arrive_expect(u32*, unsigned) {}
__device__ __forceinline__ void mma_bulk_copy(void* dst, const void* src, unsigned bytes, u32*) {
  gq_emu_copy(dst, src, (int)bytes);
}
__device__ __forceinline__ void mma_bulk_commit() { gq_emu_commit(); }
// pending: the stages this thread committed after the one waited for.
__device__ __forceinline__ void mma_bulk_wait(u32*, unsigned, int pending) { gq_emu_wait(pending); }
#else
__device__ __forceinline__ void mma_bar_init(u32* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mma_smem_addr(bar)), "r"(count));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mma_bar_arrive_expect(u32* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mma_smem_addr(bar)), "r"(bytes)
               : "memory");
}
// bytes: a multiple of 16; both addresses 16-byte aligned.
__device__ __forceinline__ void mma_bulk_copy(void* dst, const void* src, unsigned bytes, u32* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   mma_smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(mma_smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void mma_bulk_commit() {}
__device__ __forceinline__ void mma_bulk_wait(u32* bar, unsigned parity, int) {
  unsigned done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(mma_smem_addr(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}
#endif

// Two floats as bf16 (nearest even), the first in the low half (the mma fragments' order).
__device__ __forceinline__ u32 mma_pack_bf16(float lo, float hi) {
  return (u32)f32_to_bf16(lo) | ((u32)f32_to_bf16(hi) << 16);
}
