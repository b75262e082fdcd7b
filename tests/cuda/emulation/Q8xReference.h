// The q8 form of x that gemv_q_quantize_x writes (and a producer's q8 companion, Q8Companion.h):
// for `elems` values in groups of 32, int8 q = round(x / d) with d = amax / 127 (0 for an all-zero
// group, NaN when the group holds one), then the f32 scales, then d * (sum of q) per 16. The host
// reference of the emulation checks; `layout` starts as the bytes the output held before (its
// poison), and only the first `written` values' groups are replaced.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

constexpr size_t EmuQ8xBytes(int64_t elems) { return size_t(elems) + size_t(elems / 32) * 4 + size_t(elems / 16) * 4; }

inline void EmuQ8xReference(const float* y, int64_t elems, int64_t written, unsigned char* layout) {
  signed char* xq = reinterpret_cast<signed char*>(layout);
  unsigned char* xd = layout + elems;
  unsigned char* xs = xd + (elems / 32) * 4;
  for (int64_t b = 0; b < written / 32; ++b) {
    const float* x = y + b * 32;
    float amax = 0;
    bool nan = false;
    for (int l = 0; l < 32; ++l) amax = std::fmax(amax, std::fabs(x[l])), nan |= x[l] != x[l];
    float d = amax / 127.0f;
    int q[32];
    for (int l = 0; l < 32; ++l) q[l] = amax > 0.0f ? static_cast<int>(std::nearbyint(x[l] / d)) : 0;
    if (nan) d = std::nanf("");
    for (int l = 0; l < 32; ++l) xq[b * 32 + l] = static_cast<signed char>(q[l]);
    std::memcpy(xd + b * 4, &d, 4);
    for (int h = 0; h < 2; ++h) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += q[16 * h + l];
      const float v = d * static_cast<float>(s);
      std::memcpy(xs + (2 * b + h) * 4, &v, 4);
    }
  }
}
