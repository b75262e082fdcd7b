// KV caches filled on the host emulation as the kernels fill them (include after
// kernels/cuda/Common.cuh): kv_append's grid-stride threads storing through kv_store_warp, so a
// q8_0 cache is quantized a block per warp exactly as on the GPU.
#pragma once

#include <vector>

// Bytes of n elements of storage type kType (Common.cuh codes; q8_0: n a multiple of 32).
template <int kType>
constexpr long long emu_kv_bytes(long long n) {
  return kType == 3 ? n / 32 * MEMRA_Q8_0_BYTES : n * (kType == 0 ? 4 : 2);
}

// Stores src[0..n) as elements at(0..n-1) of `dst` (storage type kType) with one emulated block of
// 256 threads striding over i, and returns the values load_as_f32 reads back at those elements.
// For q8_0, n is a multiple of 32 and each 32-aligned run of i maps to one block.
template <int kType, class At>
std::vector<float> emu_store_kv(void* dst, const float* src, long long n, const At& at) {
  emu_launch(
      [&](const void*) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (long long)gridDim.x * blockDim.x)
          kv_store_warp<kType>(dst, at(i), src[i]);
      },
      1, 256, nullptr);
  std::vector<float> back(n);
  for (long long i = 0; i < n; ++i) back[i] = load_as_f32<kType>(dst, at(i));
  return back;
}
