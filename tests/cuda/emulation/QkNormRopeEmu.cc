// kernels/cuda/Rope.cu's qk_norm_rope_pair (q's head rows then k's in one launch) without a GPU:
// on the host emulation (CudaHostEmulation.h) with the ROPE_* -D constants of the compile, over
// QKR_EMU_T tokens at positions 5, 6, ...; outputs NaN-poisoned first. Checked against
// qk_norm_rope_rows (the two-launch form it replaces) on each tensor, bit for bit, and against
// a float64 reference of rms_norm then NeoX rope (normalized MSE). Exit status 1 on a difference.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/RopeParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0; }  // not used by these kernels
void emu_register(const char*, void (*)(const void*)) {}

namespace qkr_emu {
#include "kernels/cuda/Rope.cu"
}

int main() {
  constexpr int T = QKR_EMU_T, HQ = ROPE_HEADS, HK = ROPE_HEADS_K, D = ROPE_DIM, NROT = ROPE_NROT;
  std::mt19937 rng(7);
  std::normal_distribution<float> N(0.0f, 1.0f);
  std::vector<float> q(T * HQ * D), k(T * HK * D), qw(D), kw(D);
  for (auto* v : {&q, &k, &qw, &kw})
    for (float& x : *v) x = N(rng);
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = 5 + t;
  const float eps = 1e-6f, theta_scale = std::pow(10000.0f, -2.0f / NROT);
  std::vector<float> qy(q.size(), std::nanf("")), ky(k.size(), std::nanf(""));
  QkNormRopePairParams p{};
  p.qx = q.data(), p.kx = k.data(), p.qw = qw.data(), p.kw = kw.data(), p.qy = qy.data(), p.ky = ky.data();
  p.pos = pos.data(), p.n_q = T * HQ, p.n_k = T * HK, p.eps = eps, p.theta_scale = theta_scale;
  const unsigned grid = (T * (HQ + HK) + 7) / 8;
  emu_launch([](const void* a) { qkr_emu::qk_norm_rope_pair(*static_cast<const QkNormRopePairParams*>(a)); },
             grid > 3 ? grid / 2 : grid, 256, &p);  // fewer blocks than rows: the grid stride too
  int fail = 0;
  // The two-launch form on q (ROPE_HEADS a token), and on k where its head count does not matter
  // to the position (one token).
  for (int which = 0; which < (T == 1 ? 2 : 1); ++which) {
    std::vector<float>& x = which == 0 ? q : k;
    std::vector<float> y(x.size(), std::nanf(""));
    QkNormRopeParams r{};
    r.x = x.data(), r.w = which == 0 ? qw.data() : kw.data(), r.y = y.data(), r.pos = pos.data();
    r.n_rows = (long long)(x.size() / D), r.eps = eps, r.theta_scale = theta_scale;
    emu_launch([](const void* a) { qkr_emu::qk_norm_rope_rows(*static_cast<const QkNormRopeParams*>(a)); },
               (unsigned)((r.n_rows + 7) / 8), 256, &r);
    const std::vector<float>& got = which == 0 ? qy : ky;
    const int differ = std::memcmp(got.data(), y.data(), y.size() * 4) != 0;
    std::printf("qk_norm_rope_pair %s vs qk_norm_rope_rows: %s\n", which == 0 ? "q" : "k",
                differ ? "DIFFERENT" : "bit for bit");
    fail |= differ;
  }
  // float64: y = rope(x / rms(x) * w) over the first NROT dims.
  for (int which = 0; which < 2; ++which) {
    const std::vector<float>& x = which == 0 ? q : k;
    const std::vector<float>& w = which == 0 ? qw : kw;
    const std::vector<float>& got = which == 0 ? qy : ky;
    const int H = which == 0 ? HQ : HK;
    double err = 0, ref = 0;
    int bad = 0;
    for (int row = 0; row < T * H; ++row) {
      const float* xr = x.data() + (size_t)row * D;
      double ss = 0;
      for (int d = 0; d < D; ++d) ss += double(xr[d]) * xr[d];
      const double s = 1.0 / std::sqrt(ss / D + eps);
      std::vector<double> v(D);
      for (int d = 0; d < D; ++d) v[d] = xr[d] * s * w[d];
      std::vector<double> o = v;
      for (int i = 0; i < NROT / 2; ++i) {
        const double th = pos[row / H] * std::pow(10000.0, -2.0 * i / NROT);
        o[i] = v[i] * std::cos(th) - v[i + NROT / 2] * std::sin(th);
        o[i + NROT / 2] = v[i] * std::sin(th) + v[i + NROT / 2] * std::cos(th);
      }
      for (int d = 0; d < D; ++d) {
        const double g = got[(size_t)row * D + d];
        if (!std::isfinite(g)) ++bad;
        err += (g - o[d]) * (g - o[d]);
        ref += o[d] * o[d];
      }
    }
    std::printf("qk_norm_rope_pair %s: T %d heads %d D %d n_rot %d: nmse %.3g vs float64%s\n", which == 0 ? "q" : "k",
                T, H, D, NROT, err / ref, bad ? " (unwritten outputs)" : "");
    if (bad || !(err / ref < 1e-10)) fail = 1;
  }
  return fail;
}
