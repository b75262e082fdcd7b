// Shared helpers of the memra CUDA kernels (compiled by NVRTC; no system headers).
// Activations are f32; weights may be f32, f16 or bf16 (raw 16-bit storage, converted here).
#pragma once

typedef long long i64;
typedef unsigned short u16;

__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float(((unsigned)h) << 16); }
#if defined(MEMRA_HOST_EMULATION)
// tests/cuda/emulation: the same conversions on the host (round to nearest-even; _Float16 is IEEE
// binary16), so kernels that widen or round 16-bit values run there too.
__device__ __forceinline__ u16 f32_to_bf16(float f) {
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<u16>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<u16>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float f16_to_f32(u16 h) {
  _Float16 x;
  __builtin_memcpy(&x, &h, 2);
  return static_cast<float>(x);
}
__device__ __forceinline__ u16 f32_to_f16(float f) {
  const _Float16 x = static_cast<_Float16>(f);
  u16 h;
  __builtin_memcpy(&h, &x, 2);
  return h;
}
#else
__device__ __forceinline__ u16 f32_to_bf16(float f) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ float f16_to_f32(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ u16 f32_to_f16(float f) {
  u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
#endif

// Storage type codes used as specialization constants: 0 f32, 1 f16, 2 bf16; KV caches also 3,
// q8_0 (-ctk / -ctv q8_0): ggml's blocks of 32 elements, an f16 scale d then 32 int8 q, x = q d;
// element i is byte 2 + i % 32 of block i / 32. A q8_0 element is stored a block at a time
// (kv_store_warp); load_as_f32 and PackedElems read every code.
#define MEMRA_Q8_0_BYTES 34
template <int kType>
__device__ __forceinline__ float load_as_f32(const void* p, i64 i) {
  if (kType == 0) return static_cast<const float*>(p)[i];
  if (kType == 1) return f16_to_f32(static_cast<const u16*>(p)[i]);
  if (kType == 3) {
    const unsigned char* b = static_cast<const unsigned char*>(p) + (i >> 5) * MEMRA_Q8_0_BYTES;
    return static_cast<float>(static_cast<signed char>(b[2 + (i & 31)])) * f16_to_f32(*reinterpret_cast<const u16*>(b));
  }
  return bf16_to_f32(static_cast<const u16*>(p)[i]);
}

// Stores v as element i of storage type kType (codes 0-2 as above; 16-bit: rounded to
// nearest-even). q8_0 elements are stored by a whole warp (kv_store_warp).
template <int kType>
__device__ __forceinline__ void store_from_f32(void* p, i64 i, float v) {
  static_assert(kType >= 0 && kType <= 2, "q8_0 is stored a block at a time: kv_store_warp");
  if (kType == 0)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<u16*>(p)[i] = kType == 1 ? f32_to_f16(v) : f32_to_bf16(v);
}

// N consecutive elements of storage type kType held as raw 32-bit words: loaded with the widest
// aligned vector loads (16 bytes where N allows), widened to f32 one element at a time on use, so
// a 16-bit row costs half the registers of an f32 one while its load is in flight.
template <int kType, int N>
struct PackedElems {
  static constexpr int kWords = kType == 0 ? N : N / 2;
  unsigned w[kWords];
  // Elements first..first+N-1 of `base`; first * element bytes must be a multiple of the vector.
  __device__ __forceinline__ void load(const void* base, i64 first) {
    const char* p = static_cast<const char*>(base) + first * (kType == 0 ? 4 : 2);
    if (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 v = reinterpret_cast<const uint4*>(p)[i];
        w[4 * i] = v.x;
        w[4 * i + 1] = v.y;
        w[4 * i + 2] = v.z;
        w[4 * i + 3] = v.w;
      }
    } else if (kWords % 2 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 2; ++i) {
        const uint2 v = reinterpret_cast<const uint2*>(p)[i];
        w[2 * i] = v.x;
        w[2 * i + 1] = v.y;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kWords; ++i) w[i] = reinterpret_cast<const unsigned*>(p)[i];
    }
  }
  __device__ __forceinline__ float get(int i) const {
    if (kType == 0) return __uint_as_float(w[i]);
    const u16 h = static_cast<u16>((i & 1) ? w[i / 2] >> 16 : w[i / 2] & 0xffffu);
    return kType == 1 ? f16_to_f32(h) : bf16_to_f32(h);
  }
};

// N consecutive q8_0 elements (N even and a divisor of 32, first a multiple of N: one block's
// slice): the block's scale and N int8 held as 16-bit words (a block is 2-byte aligned only).
template <int N>
struct PackedElems<3, N> {
  static_assert(N % 2 == 0 && 32 % N == 0, "a q8_0 slice is an even divisor of the block");
  float d;
  u16 w[N / 2];
  __device__ __forceinline__ void load(const void* base, i64 first) {
    const unsigned char* b = static_cast<const unsigned char*>(base) + (first >> 5) * MEMRA_Q8_0_BYTES;
    d = f16_to_f32(*reinterpret_cast<const u16*>(b));
    const u16* q = reinterpret_cast<const u16*>(b + 2 + (first & 31));
#pragma unroll
    for (int i = 0; i < N / 2; ++i) w[i] = q[i];
  }
  __device__ __forceinline__ float get(int i) const {
    const signed char q = static_cast<signed char>((i & 1) ? w[i / 2] >> 8 : w[i / 2] & 0xffu);
    return static_cast<float>(q) * d;
  }
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// x as q8 for the decode products (GemvQuant.cu GQ_XQ 1 and 2): block b of 32 values, lane l
// holding value 32 b + l -> xq[32 b + l] = round(x / d), xd[b] = d = amax / 127, xs[2 b + h] =
// d * (sum of the 16 q of half h). A NaN anywhere in the block makes d NaN. All 32 lanes together.
__device__ __forceinline__ void q8x_quantize_block(float x, int b, int lane, signed char* xq, float* xd, float* xs) {
  const float amax = warp_max(fabsf(x));
  float d = amax / 127.0f;
  const int q = amax > 0.0f ? __float2int_rn(x / d) : 0;
  if (__any_sync(0xffffffffu, x != x)) d = __int_as_float(0x7fc00000);
  int sum = q;
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  xq[b * 32 + lane] = (signed char)q;
  if (lane == 0) xd[b] = d;
  if ((lane & 15) == 0) xs[2 * b + (lane >> 4)] = d * (float)sum;
}

#ifdef MEMRA_Q8X_OFF
// The q8 companion of a producer's result y of MEMRA_Q8X_ELEMS values (kernels/cuda/Q8Companion.h):
// gemv_q_quantize_x's layout at y + MEMRA_Q8X_OFF bytes, which depends only on the flat index (a
// [T, H, D] result and its [T, H * D] view have the same one). v is y[i]; all 32 lanes of a warp
// together, lane l holding an i with i % 32 == l of one 32-aligned group.
__device__ __forceinline__ void q8x_store(float* y, i64 i, float v) {
  signed char* xq = reinterpret_cast<signed char*>(y) + MEMRA_Q8X_OFF;
  float* xd = reinterpret_cast<float*>(xq + (i64)MEMRA_Q8X_ELEMS);
  float* xs = xd + (i64)MEMRA_Q8X_ELEMS / 32;
  q8x_quantize_block(v, (int)(i / 32), (int)(i & 31), xq, xd, xs);
}
#endif

// v as element i of a KV cache of storage type kType reads back (16-bit: rounded to nearest-even;
// q8_0: quantized with its block), stored there when `write`. Called by all 32 lanes of a warp
// together, lane l holding element 32 b + l of a q8_0 cache (one whole block; any elements for the
// other codes). q8_0 as ggml's quantize_row_q8_0 (kernels/formats/Quant.cc): d = amax / 127,
// q = round-half-away(v / d), d kept as f16, so the CPU executor's bytes and these agree.
template <int kType>
__device__ __forceinline__ float kv_store_warp(void* p, i64 i, float v, bool write = true) {
  if (kType != 3) {
    if (write) store_from_f32<(kType == 3 ? 0 : kType)>(p, i, v);
    if (kType == 1) return f16_to_f32(f32_to_f16(v));
    if (kType == 2) return bf16_to_f32(f32_to_bf16(v));
    return v;
  }
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  const signed char q = static_cast<signed char>(static_cast<int>(roundf(v * id)));
  const u16 dh = f32_to_f16(d);
  if (write) {
    unsigned char* b = static_cast<unsigned char*>(p) + (i >> 5) * MEMRA_Q8_0_BYTES;
    if ((i & 31) == 0) *reinterpret_cast<u16*>(b) = dh;
    b[2 + (i & 31)] = static_cast<unsigned char>(q);
  }
  return static_cast<float>(q) * f16_to_f32(dh);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

// A head row of N = 32 kPer elements spread over a warp (element lane + 32 k in v[k]), loaded
// from `src`: v, and the row's RMSNorm scale 1 / sqrt(mean(v^2) + eps) (every lane gets it). The
// per-head norms of qk_norm_rope_rows (Rope.cu) and attention_step_split (Attention.cu), which may
// load the row early (warp_row_load) and take the scale of the values held (warp_row_rms_scale_of,
// the same sums in the same order).
template <int kPer>
__device__ __forceinline__ float warp_row_rms_scale_of(const float (&v)[kPer], float eps) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) ss += v[k] * v[k];
  return 1.0f / sqrtf(warp_sum(ss) / (float)(32 * kPer) + eps);
}
template <int kPer>
__device__ __forceinline__ void warp_row_load(const float* src, float (&v)[kPer]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < kPer; ++k) v[k] = src[lane + 32 * k];
}
template <int kPer>
__device__ __forceinline__ float warp_row_rms_scale(const float* src, float (&v)[kPer], float eps) {
  warp_row_load(src, v);
  return warp_row_rms_scale_of(v, eps);
}
// NeoX rope's angle of pair i at position P: theta_0 = P, theta_{i+1} = theta_i * theta_scale in
// f32, as ggml and the CPU reference form it (not pow: the products' rounding is the reference).
__device__ __forceinline__ float rope_theta(float P, int i, float theta_scale) {
  float theta = P;
  for (int k = 0; k < i; ++k) theta *= theta_scale;
  return theta;
}

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float siluf_(float x) { return x / (1.0f + expf(-x)); }
// GELU, tanh form, as kernels/cpu/Elementwise.cc's GeluScalar computes it.
__device__ __forceinline__ float geluf_(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
}
__device__ __forceinline__ float softplusf_(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
// The gated products of the SwiGLU forms: act(gate) * up, or with a clamped op's limit L (ir/Ops.def
// swiglu clamp; its f32 bits as MEMRA_GLU_LIMIT_BITS, AddGluClampDefine) min(act, L) * clamp(up, -L, L).
#ifndef MEMRA_GLU_LIMIT_BITS
#define MEMRA_GLU_LIMIT_BITS 0
#endif
__device__ __forceinline__ float glu_(float act, float up) {
  if (MEMRA_GLU_LIMIT_BITS == 0) return act * up;
  const float lim = __int_as_float(MEMRA_GLU_LIMIT_BITS);
  const float a = act < lim ? act : lim;
  const float u = up < lim ? up : lim;
  return a * (u > -lim ? u : -lim);
}

#define MEMRA_NEG_INF __int_as_float(0xff800000)

#define MEMRA_GRID_STRIDE(i, n) \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// bar.sync id, count: a barrier for the `count` threads (whole warps) that call it, the others of the
// block never reaching it; every caller at this one instruction. For a block whose warps do not all
// take part (a warp with no work), where __syncthreads() met at different places in different
// warps would be undefined (compute-sanitizer synccheck: "divergent threads in block"). Id 0 is
// __syncthreads()'s.
__device__ __forceinline__ void memra_named_barrier(unsigned id, unsigned count) {
#if defined(__CUDA_ARCH__)
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
#elif defined(MEMRA_HOST_EMULATION)
  emu_named_barrier(id, count);
#endif
}

// Thread-block clusters (sm_90+; the launch's cluster dimension): a barrier over every thread of
// every block of the cluster, split in its two halves (arrive with release semantics: this
// thread's shared and global writes are visible to the cluster once everyone has arrived; wait
// with acquire semantics), and a block's shared variable as seen from another block of the
// cluster (distributed shared memory: the generic address of `p`'s counterpart in block `rank`).
// A block must not exit while another may still read its shared memory: the last remote read
// comes before an arrive that the owner waits on. The host emulation runs a cluster's blocks
// together (tests/cuda/emulation/CudaHostEmulation.h emu_launch_cluster).
__device__ __forceinline__ void memra_cluster_arrive() {
#if defined(__CUDA_ARCH__)
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#elif defined(MEMRA_HOST_EMULATION)
  emu_cluster_arrive();
#endif
}
__device__ __forceinline__ void memra_cluster_wait() {
#if defined(__CUDA_ARCH__)
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#elif defined(MEMRA_HOST_EMULATION)
  emu_cluster_wait();
#endif
}
__device__ __forceinline__ void memra_cluster_sync() {
  memra_cluster_arrive();
  memra_cluster_wait();
}
template <typename T>
__device__ __forceinline__ const T* memra_cluster_map(const T* p, unsigned rank) {
#if defined(__CUDA_ARCH__)
  unsigned long long out;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
  return reinterpret_cast<const T*>(out);
#elif defined(MEMRA_HOST_EMULATION)
  return emu_cluster_map(p, rank);
#else
  return p;
#endif
}
// A block's shared-memory struct. The host emulation runs a cluster's blocks at once, so there
// each block's copy lives in its own arena rather than in a function static.
#if defined(MEMRA_HOST_EMULATION)
#define MEMRA_BLOCK_SHARED(T, name) T& name = *emu_block_shared<T>()
#else
#define MEMRA_BLOCK_SHARED(T, name) __shared__ T name
#endif

// Asks the L2 for the bytes [p, p + bytes) with sm_90's bulk prefetch (a hint: nothing waits for
// it and nothing is written, so a kernel may issue it before memra_grid_dependency). The range
// goes in 64 KB pieces over lane 0 of the warps of the launch's first `blocks` blocks (piece i to
// the warp i mod their count): each SM's copy engine issues a share, not one engine all of it. The
// instruction takes 16-byte aligned ranges: a head before p's first 16-byte boundary and a tail past
// the last are left out. A no-op before sm_90; the host emulation hands each piece to
// emu_l2_prefetch_hook when one is set (tests/cuda/emulation/L2PrefetchEmu.cc checks the split).
#if defined(MEMRA_HOST_EMULATION)
inline void (*emu_l2_prefetch_hook)(const void* p, unsigned bytes) = nullptr;
#endif
// 16 bytes of a weight a product streams once, marked first to leave the L2 (an L2 cache policy
// of evict_first over the whole line, L1 not allocated): the lines the products read once then
// give way before what is read again or asked for ahead (memra_l2_prefetch's lines, the KV cache,
// activations). A plain read-only load in the host emulation and before sm_80.
__device__ __forceinline__ uint4 memra_ld_evict_first(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
#else
  return __ldg(static_cast<const uint4*>(p));
#endif
}

// The products' issuing blocks (Gemv.cu, GemvQuant.cu): within the first wave of any launch.
#define MEMRA_L2_PREFETCH_BLOCKS 16
__device__ __forceinline__ void memra_l2_prefetch(const void* p, long long bytes,
                                                  int blocks = MEMRA_L2_PREFETCH_BLOCKS) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(MEMRA_HOST_EMULATION)
  constexpr long long kPiece = 64 << 10;
  const int warps = (int)(blockDim.x >> 5), issuers = min((int)gridDim.x, blocks) * warps;
  const int who = (int)blockIdx.x * warps + (int)(threadIdx.x >> 5);
  if ((threadIdx.x & 31) != 0 || who >= issuers) return;
  const long long head = (long long)((16 - (reinterpret_cast<unsigned long long>(p) & 15)) & 15);
  const char* c = static_cast<const char*>(p) + head;
  bytes = (bytes - head) & ~15LL;
  for (long long off = (long long)who * kPiece; off < bytes; off += (long long)issuers * kPiece) {
    const unsigned n = (unsigned)(bytes - off < kPiece ? bytes - off : kPiece);
#if defined(MEMRA_HOST_EMULATION)
    if (emu_l2_prefetch_hook != nullptr) emu_l2_prefetch_hook(c + off, n);
#else
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(c + off), "r"(n) : "memory");
#endif
  }
#endif
}

// Programmatic dependent launch (sm_90+). The executor launches kernels with the programmatic
// stream serialization attribute, so a kernel may become resident while the one before it still
// runs. Every kernel therefore calls memra_grid_dependency() before it reads or writes any
// activation, state or output (weights and parameters may be read before: the decode GEMVs start
// their weight copies first, which hides their first-byte latency behind the previous kernel).
// It first lets the next kernel launch (its blocks then wait the same way), then waits until
// every earlier grid has completed and its memory is visible. Unconditional in every block: a
// block that returned without waiting could let a grid complete before its predecessor, and the
// wait of the grid after it would no longer cover the one before. Without the attribute (or
// before sm_90) both instructions do nothing. tests/gpuops/KernelSourcesPdl_test.cc checks that
// every __global__ function calls it.
__device__ __forceinline__ void memra_grid_dependency() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
