// Hopper warpgroup MMA (wgmma.mma_async, sm_90a) for FlashAttentionWgmma.cu: shared-memory matrix
// descriptors of the 128-byte swizzled layout, the fence / commit / wait protocol, and the two
// products the attention needs: S = Q K^T with both operands in shared memory (m64nNk16, N = 32 or 64 keys) and
// O += P V with P in registers and V read N-major (m64nNk16, N = 64, 128 or 256).
//
// The layout (PTX ISA, "Shared Memory Matrix Layout", 128B swizzling): a tile is stored as panels
// of 64 bf16 columns; a panel holds its rows at 128 bytes each, and within every 1024-byte atom of
// 8 rows the 16-byte chunk c of row r sits at chunk c ^ (r % 8). The panels start 1024-byte
// aligned (base offset 0). As a K-major operand (Q, K: rows are M / N, columns K) a descriptor
// points at the 32 bytes of one k16 step inside a panel, SBO = 1024 (the next 8 rows). As an
// N-major operand (V: rows are K, columns N) it points at the step's 16 rows, SBO = 1024 (the next
// 8 rows of K) and LBO = the panel stride (the next 64 columns of N). Accumulator fragments are
// mma.sync's per warp of the group (warp w: rows 16w..16w+15; d[4i..4i+3]: rows g, g, g+8, g+8,
// columns 8i + 2t, +1 of n-block i), and the register A fragment is mma.sync m16n8k16's A.
// Under MEMRA_MMA_HOST_EMULATION the products map to MmaEmulation.h's emu_wgmma.
#pragma once
#include "Mma.cuh"

typedef unsigned long long u64;

// The 16-byte chunk of (row, chunk) inside a 128-byte-swizzled panel, in bytes from its start.
__device__ __forceinline__ u32 wg_swizzle(u32 row, u32 chunk) { return row * 128u + ((chunk ^ (row & 7u)) << 4); }

#if defined(MEMRA_MMA_HOST_EMULATION)
__device__ __forceinline__ unsigned char* wg_align_smem(unsigned char* p) { return emu_wg_set_base(p); }
__device__ __forceinline__ u32 wg_smem_addr(const void* p) { return emu_wg_addr(p); }
__device__ __forceinline__ void wg_fence() {}
__device__ __forceinline__ void wg_commit() {}
template <int N>
__device__ __forceinline__ void wg_wait() {}
__device__ __forceinline__ void wg_fence_proxy_async() {}
#else
// The dynamic shared memory rounded up to the 1024-byte swizzle atom (the launch adds 1 KB).
__device__ __forceinline__ unsigned char* wg_align_smem(unsigned char* p) {
  const u32 a = mma_smem_addr(p);
  return p + (((a + 1023u) & ~1023u) - a);
}
__device__ __forceinline__ u32 wg_smem_addr(const void* p) { return mma_smem_addr(p); }
// Before a wgmma whose accumulator or A registers other instructions wrote.
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Until at most N committed groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// This thread's shared-memory writes (stores, cp.async) made visible to the async proxy wgmma reads
// through; then a barrier.
__device__ __forceinline__ void wg_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif

// The products read their A registers and write their accumulators asynchronously, until
// wg_wait: these empty statements pin the registers' values to that point, so the compiler
// neither reads an accumulator early nor reuses an A register while a product is in flight
// (CUTLASS's warpgroup_fence_operand). Call it before the products are issued and after the wait.
__device__ __forceinline__ void wg_pin(float& r) {
#if !defined(MEMRA_MMA_HOST_EMULATION)
  asm volatile("" : "+f"(r)::"memory");
#endif
}
__device__ __forceinline__ void wg_pin(u32& r) {
#if !defined(MEMRA_MMA_HOST_EMULATION)
  asm volatile("" : "+r"(r)::"memory");
#endif
}
template <int N, class T>
__device__ __forceinline__ void wg_fence_regs(T* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) wg_pin(r[i]);
}

// Shared-memory barriers (mbarrier) between the warpgroups of a block: a phase completes when
// `count` arrivals have been made; wg_mbar_wait(bar, parity) returns once the phase of that parity
// has completed (a barrier's n-th phase has parity n % 2). wg_mbar_cp_async_arrive arrives when
// all of the thread's earlier cp.async copies have landed (.noinc: the arrival is one of `count`).
// Under the host emulation the barrier word holds arrivals (bits 0-31), the phase (bit 32) and the
// count (bits 33-63), and a cp.async arrival performs the thread's queued copies first.
#if defined(MEMRA_MMA_HOST_EMULATION)
__device__ __forceinline__ void wg_mbar_init(u64* bar, u32 count) { *bar = (u64)count << 33; }
__device__ __forceinline__ void wg_mbar_arrive(u64* bar) { emu_mbar_arrive(bar); }
__device__ __forceinline__ void wg_mbar_cp_async_arrive(u64* bar) {
  gq_emu_commit();
  gq_emu_wait(0);
  emu_mbar_arrive(bar);
}
__device__ __forceinline__ void wg_mbar_wait(u64* bar, u32 parity) { emu_mbar_wait(bar, parity); }
#else
// Mma.cuh's barrier helpers over a 64-bit barrier word.
__device__ __forceinline__ void wg_mbar_init(u64* bar, u32 count) { mma_bar_init(reinterpret_cast<u32*>(bar), count); }
__device__ __forceinline__ void wg_mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mma_smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void wg_mbar_cp_async_arrive(u64* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(mma_smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void wg_mbar_wait(u64* bar, u32 parity) {
  mma_bulk_wait(reinterpret_cast<u32*>(bar), parity, 0);
}
#endif

// A descriptor of the 128-byte swizzled layout at shared address `addr` (16-byte aligned).
__device__ __forceinline__ u64 wg_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3ffffu) >> 4) | ((u64)((lbo & 0x3ffffu) >> 4) << 16) | ((u64)((sbo & 0x3ffffu) >> 4) << 32) |
         (1ull << 62);
}

#if defined(MEMRA_MMA_HOST_EMULATION)
template <int N>
__device__ __forceinline__ void wg_mma_ss(float* d, u64 da, u64 db, int scale_d) {
  emu_wgmma(d, N, da, nullptr, db, false, scale_d);
}
template <int N>
__device__ __forceinline__ void wg_mma_rs(float* d, const u32* a, u64 db, int scale_d) {
  emu_wgmma(d, N, 0, a, db, true, scale_d);
}
#else
#define WG_D8(d, i)                                                                                           \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define WG_D32(d, i) WG_D8(d, i), WG_D8(d, i + 8), WG_D8(d, i + 16), WG_D8(d, i + 24)
// d[N / 2] (+)= A (64 x 16, registers) * B (16 x N, shared, N-major); scale_d 0: d = A * B.
template <int N>
__device__ __forceinline__ void wg_mma_rs(float* d, const u32* a, u64 db, int scale_d);
// d[N / 2] (+)= A (64 x 16, shared, K-major) * B (16 x N, shared, K-major: the rows of B^T), N = 32
// or 64; scale_d 0: d = A * B.
template <int N>
__device__ __forceinline__ void wg_mma_ss(float* d, u64 da, u64 db, int scale_d);
template <>
__device__ __forceinline__ void wg_mma_ss<32>(float* d, u64 da, u64 db, int scale_d) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, %16, %17, p, 1, 1, 0, 0; }\n"
      : WG_D8(d, 0), WG_D8(d, 8)
      : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wg_mma_ss<64>(float* d, u64 da, u64 db, int scale_d) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, "
      "1, 0, 0; }\n"
      : WG_D32(d, 0)
      : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wg_mma_rs<64>(float* d, const u32* a, u64 db, int scale_d) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, "
      "%35}, %36, p, 1, 1, 1; }\n"
      : WG_D32(d, 0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wg_mma_rs<128>(float* d, const u32* a, u64 db, int scale_d) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1; }\n"
      : WG_D32(d, 0), WG_D32(d, 32)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wg_mma_rs<256>(float* d, const u32* a, u64 db, int scale_d) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
      "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, "
      "%101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, "
      "%119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 1; }\n"
      : WG_D32(d, 0), WG_D32(d, 32), WG_D32(d, 64), WG_D32(d, 96)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
#endif
