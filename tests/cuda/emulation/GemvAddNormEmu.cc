// kernels/cuda/Gemv.cu's gemv_splitk_add_norm (with GEMV_SPLITK = 2) or gemv_add_norm
// (matmul_add_rms_norm, one token) without a GPU: the product by the GEMV's blocks into the sum,
// then the launch's last block adding the residual and normalizing the row, on the host emulation
// (CudaHostEmulation.h: blocks one after another, so the last block is the grid's last). Checked
// over several launches on one ticket word against the two launches it replaces, the GEMV
// (gemv_splitk or gemv) then Norm.cu's add_rms_norm at the unit's geometry
// (warp rows up to 512 columns, else a block of 256): sum and y equal bit for bit; the product
// against float64 (nmse); the ticket zero again after every launch; outputs NaN-poisoned before
// each. Exit status 1 on any difference.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GemvParams.h"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/NormParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0.0f; }  // bf16 weights only
void emu_register(const char*, void (*)(const void*)) {}

namespace fused_emu {
#include "kernels/cuda/Gemv.cu"
}
// The two-launch form's norm: Norm.cu as NormRowLaunch configures it for one row of N columns.
#define NORM_COLS GEMV_NORM_COLS
#define NORM_BLOCK 256
#if GEMV_NORM_COLS <= 512
#define NORM_WARP_ROWS 1
#endif
namespace norm_emu {
#include "kernels/cuda/Norm.cu"
}

int main() {
  constexpr int N = GEMV_NORM_COLS, K = GEMV_K;
  std::mt19937 rng(29);
  std::normal_distribution<float> G(0.0f, 1.0f);
  std::vector<unsigned short> w((size_t)N * K);
  for (auto& v : w) v = emu_bf16(0.05f * G(rng));
  std::vector<float> nw(N);
  for (float& v : nw) v = 1.0f + 0.1f * G(rng);
  const float eps = 1e-6f;
  unsigned ticket = 0;
  int fail = 0;
#if GEMV_SPLITK == 2
  const unsigned grid = (N + GEMV_WARPS / 2 - 1) / (GEMV_WARPS / 2);  // a warp pair a row
#else
  const unsigned grid = (N + GEMV_WARPS - 1) / GEMV_WARPS;  // a warp a row
#endif
  for (int launch = 0; launch < 3; ++launch) {
    std::vector<float> x(K), b(N);
    for (float& v : x) v = G(rng);
    for (float& v : b) v = 3.0f * G(rng);
    // The fused launch.
    std::vector<float> sum(N, std::nanf("")), y(N, std::nanf(""));
    GemvAddNormParams p{};
    p.g.w.w = w.data();
    p.g.x = x.data();
    p.g.y = sum.data();
    p.g.n_rows = N;
    p.norm.b = b.data();
    p.norm.w = nw.data();
    p.norm.y = y.data();
    p.norm.ticket = &ticket;
    p.norm.eps = eps;
#if GEMV_SPLITK == 2
    emu_launch([](const void* a) { fused_emu::gemv_splitk_add_norm(*static_cast<const GemvAddNormParams*>(a)); }, grid,
               GEMV_WARPS * 32, &p);
#else
    emu_launch([](const void* a) { fused_emu::gemv_add_norm(*static_cast<const GemvAddNormParams*>(a)); }, grid,
               GEMV_WARPS * 32, &p);
#endif
    if (ticket != 0) {
      std::printf("  launch %d: the ticket is %u after the launch (not zero)\n", launch, ticket);
      fail = 1;
    }
    // The two launches: the GEMV into the product, add_rms_norm(product, b) in place.
    std::vector<float> sum2(N, std::nanf("")), y2(N, std::nanf(""));
    GemvParams g = p.g;
    g.y = sum2.data();
#if GEMV_SPLITK == 2
    emu_launch([](const void* a) { fused_emu::gemv_splitk(*static_cast<const GemvParams*>(a)); }, grid, GEMV_WARPS * 32,
               &g);
#else
    emu_launch([](const void* a) { fused_emu::gemv(*static_cast<const GemvParams*>(a)); }, grid, GEMV_WARPS * 32, &g);
#endif
    NormParams n{};
    n.x = sum2.data();
    n.z = b.data();
    n.w = nw.data();
    n.sum = sum2.data();
    n.y = y2.data();
    n.n_rows = 1;
    n.eps = eps;
    const unsigned norm_block = NORM_BLOCK, norm_grid = 1;
    emu_launch([](const void* a) { norm_emu::add_rms_norm(*static_cast<const NormParams*>(a)); }, norm_grid, norm_block,
               &n);
    const bool same = std::memcmp(sum.data(), sum2.data(), N * 4) == 0 && std::memcmp(y.data(), y2.data(), N * 4) == 0;
    // The product against float64: sum - b.
    double err = 0, ref = 0;
    for (int r = 0; r < N; ++r) {
      double d = 0;
      for (int c = 0; c < K; ++c) d += double(emu_bf16_float(w[(size_t)r * K + c])) * x[c];
      d += b[r];
      err += (sum[r] - d) * (sum[r] - d);
      ref += d * d;
    }
    const double nmse = err / ref;
#if GEMV_SPLITK == 2
    const char* entry = "gemv_splitk_add_norm";
#else
    const char* entry = "gemv_add_norm";
#endif
    std::printf("%s N %d K %d launch %d: sum and y %s the two launches', sum nmse %.3g\n", entry, N, K, launch,
                same ? "equal to" : "DIFFER from", nmse);
    if (!same || !(nmse < 1e-10)) fail = 1;
  }
  return fail;
}
