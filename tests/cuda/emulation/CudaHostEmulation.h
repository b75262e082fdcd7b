// A host emulation of the CUDA features kernels/cuda/GemvQuant.cu uses, for checking the kernels'
// logic without a GPU (tests/cuda/emulation/run.sh): one block (or one cluster) at a time, one
// std::thread per CUDA thread, warps synchronized by barriers for shuffles / votes / __syncwarp, __shared__ as function
// statics (so a kernel launched in clusters of more than one block keeps its shared memory in one
// MEMRA_BLOCK_SHARED struct, the block's arena: one such struct a kernel), cp.async and bulk copies queued per thread
// and performed by the wait that covers their group (so a read before its wait sees stale data, as it could on the
// GPU). Include it, then the kernel headers with __CUDACC__ defined, then the .cu (GemvQuantEmuConfig.cc).
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define GQ_HOST_EMULATION 1
#define MEMRA_HOST_EMULATION 1  // Common.cuh: host conversions instead of PTX

struct EmuU3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local EmuU3 threadIdx, blockIdx;
inline EmuU3 blockDim, gridDim;
struct uint4 {
  unsigned x, y, z, w;
};
struct int4 {
  int x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct float2 {
  float x, y;
};
// CUDA's vector constructors (every emulated kernel file gets them here).
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

// cvt.rn.bf16.f32: round to nearest even (finite inputs); and a bf16's f32 value.
inline unsigned short emu_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float emu_bf16_float(unsigned short h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

struct EmuWarp {
  std::barrier<> bar{32};
  uint64_t slot[32];
};
inline thread_local EmuWarp* emu_warp = nullptr;
inline thread_local int emu_lane = 0;
inline thread_local std::barrier<>* emu_block_bar = nullptr;
inline thread_local std::barrier<>* emu_wg_bar = nullptr;  // the thread's warpgroup (wgmma)

template <class T>
T emu_shfl(T v, int src) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  emu_warp->slot[emu_lane] = b;
  emu_warp->bar.arrive_and_wait();
  const uint64_t r = emu_warp->slot[src & 31];
  emu_warp->bar.arrive_and_wait();
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int o) {
  return emu_shfl(v, emu_lane ^ o);
}
template <class T>
T __shfl_sync(unsigned, T v, int src) {
  return emu_shfl(v, src);
}
// Lanes below `o` keep their own value, as on the device.
template <class T>
T __shfl_up_sync(unsigned, T v, int o) {
  return emu_shfl(v, emu_lane >= o ? emu_lane - o : emu_lane);
}
inline int __any_sync(unsigned, int p) {
  emu_warp->slot[emu_lane] = p ? 1 : 0;
  emu_warp->bar.arrive_and_wait();
  int any = 0;
  for (int i = 0; i < 32; ++i) any |= (int)emu_warp->slot[i];
  emu_warp->bar.arrive_and_wait();
  return any;
}
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar.arrive_and_wait(); }
inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
// bar.sync ID, COUNT (Common.cuh memra_named_barrier): the block's barrier ID for COUNT threads,
// made by the first thread to arrive (blocks run one at a time, so one block's threads share it).
struct EmuNamedBarriers {
  std::mutex mu;
  std::unique_ptr<std::barrier<>> bar[16];
  unsigned count[16] = {};
};
inline thread_local EmuNamedBarriers* emu_named = nullptr;
inline void emu_named_barrier(unsigned id, unsigned count) {
  std::barrier<>* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(emu_named->mu);
    if (!emu_named->bar[id] || emu_named->count[id] != count) {
      emu_named->bar[id] = std::make_unique<std::barrier<>>(count);
      emu_named->count[id] = count;
    }
    b = emu_named->bar[id].get();
  }
  b->arrive_and_wait();
}

inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = (uint64_t)y << 32 | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
  return (unsigned)((((uint64_t)hi << 32) | lo) >> (sh & 31));
}
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
  return c;
}
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline float __int_as_float(int u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline int __float2int_rn(float f) { return (int)std::nearbyint(f); }
template <class T>
T __ldg(const T* p) {
  return *p;
}
template <class T>
T __ldcg(const T* p) {
  return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_acquire);
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
using std::max;
using std::min;

float emu_half(unsigned short h);  // formats::HalfToFloat

// cp.async and bulk copies: queued per thread, performed by the wait that covers their group.
struct EmuCopy {
  void* d;
  const void* s;
  int n;
};
inline thread_local std::vector<EmuCopy> emu_open;
inline thread_local std::deque<std::vector<EmuCopy>> emu_groups;
inline void gq_emu_copy(void* d, const void* s, int n) { emu_open.push_back({d, s, n}); }
inline void gq_emu_commit() {
  emu_groups.push_back(std::move(emu_open));
  emu_open.clear();
}
inline void gq_emu_wait(int n) {
  while ((int)emu_groups.size() > n) {
    for (const EmuCopy& c : emu_groups.front()) std::memcpy(c.d, c.s, c.n);
    emu_groups.pop_front();
  }
}

// A block's shared-memory arena (Common.cuh MEMRA_BLOCK_SHARED: blocks of a cluster run at once,
// so a function static cannot hold their shared memory) and the arenas of its cluster
// (memra_cluster_map); the cluster's barrier (memra_cluster_arrive / wait).
constexpr size_t kEmuArenaBytes = 64 * 1024;
struct EmuArena {
  alignas(64) unsigned char bytes[kEmuArenaBytes];
};
inline thread_local unsigned char* emu_arena = nullptr;
inline thread_local std::vector<std::unique_ptr<EmuArena>>* emu_cluster_arenas = nullptr;
inline thread_local std::barrier<>* emu_cluster_bar = nullptr;
inline thread_local std::optional<std::barrier<>::arrival_token> emu_cluster_token;
template <class T>
T* emu_block_shared() {
  static_assert(sizeof(T) <= kEmuArenaBytes, "a block's shared struct past the emulation's arena");
  return reinterpret_cast<T*>(emu_arena);
}
template <class T>
const T* emu_cluster_map(const T* p, unsigned rank) {
  const auto off = reinterpret_cast<const unsigned char*>(p) - emu_arena;
  if (off < 0 || off >= (std::ptrdiff_t)kEmuArenaBytes || rank >= emu_cluster_arenas->size()) std::abort();
  return reinterpret_cast<const T*>((*emu_cluster_arenas)[rank]->bytes + off);
}
inline void emu_cluster_arrive() { emu_cluster_token.emplace(emu_cluster_bar->arrive()); }
inline void emu_cluster_wait() {
  if (!emu_cluster_token) std::abort();  // a wait without its arrive
  emu_cluster_bar->wait(std::move(*emu_cluster_token));
  emu_cluster_token.reset();
}

// Runs fn(params) over grid x block threads, one cluster of `cluster` consecutive blocks at a time
// (its blocks' threads all at once, so cluster barriers and distributed shared memory work), in
// cluster order or, with emu_reverse_blocks, last cluster first (a kernel whose blocks meet
// through global memory must not depend on the order the GPU happens to run them in). Each block's
// arena is filled with 0xff first (NaN as floats), so a read of shared memory never written shows.
inline bool emu_reverse_blocks = false;
inline void emu_launch_cluster(const std::function<void(const void*)>& fn, unsigned grid, unsigned block,
                               unsigned cluster, const void* params) {
  if (cluster == 0 || grid % cluster != 0) std::abort();
  gridDim.x = grid;
  blockDim.x = block;
  const unsigned clusters = grid / cluster;
  for (unsigned i = 0; i < clusters; ++i) {
    const unsigned cl = emu_reverse_blocks ? clusters - 1 - i : i;
    struct Block {
      std::vector<std::unique_ptr<EmuWarp>> warps;
      std::unique_ptr<std::barrier<>> bar;
      EmuNamedBarriers named;
      std::vector<std::unique_ptr<std::barrier<>>> groups;
    };
    std::vector<std::unique_ptr<Block>> blocks;
    std::vector<std::unique_ptr<EmuArena>> arenas;
    for (unsigned k = 0; k < cluster; ++k) {
      auto b = std::make_unique<Block>();
      for (unsigned w = 0; w < block / 32; ++w) b->warps.push_back(std::make_unique<EmuWarp>());
      b->bar = std::make_unique<std::barrier<>>(block);
      for (unsigned g = 0; g < (block + 127) / 128; ++g)
        b->groups.push_back(std::make_unique<std::barrier<>>(std::min<unsigned>(128, block - 128 * g)));
      blocks.push_back(std::move(b));
      arenas.push_back(std::make_unique<EmuArena>());
      std::memset(arenas.back()->bytes, 0xff, kEmuArenaBytes);
    }
    std::barrier<> cluster_bar(cluster * block);
    std::vector<std::thread> th;
    for (unsigned k = 0; k < cluster; ++k)
      for (unsigned t = 0; t < block; ++t)
        th.emplace_back([&, k, t] {
          Block& b = *blocks[k];
          threadIdx.x = t;
          blockIdx.x = cl * cluster + k;
          emu_warp = b.warps[t / 32].get();
          emu_lane = (int)(t % 32);
          emu_block_bar = b.bar.get();
          emu_named = &b.named;
          emu_wg_bar = b.groups[t / 128].get();
          emu_arena = arenas[k]->bytes;
          emu_cluster_arenas = &arenas;
          emu_cluster_bar = &cluster_bar;
          emu_open.clear();
          emu_groups.clear();
          fn(params);
          gq_emu_wait(0);
        });
    for (auto& t : th) t.join();
  }
}
inline void emu_launch(const std::function<void(const void*)>& fn, unsigned grid, unsigned block, const void* params) {
  emu_launch_cluster(fn, grid, block, 1, params);
}

// Kernels by "module key::entry".
void emu_register(const char* key, void (*fn)(const void*));
