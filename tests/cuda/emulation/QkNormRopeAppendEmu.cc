// kernels/cuda/Rope.cu's qk_norm_rope_append (fuse-qk-norm-rope-append: q's rows rotated into the
// result, k's rotated and v's, normed or not, stored into the caches, one launch) without a GPU, on
// the host emulation (CudaHostEmulation.h) with the ROPE_* / KV_* -D constants of the compile, over
// QKR_EMU_T tokens at positions 5, 6, ... (past a ring's first lap when KV_RING is set). Checked
// against the two launches it replaces, qk_norm_rope_pair (into q and k buffers) then Elementwise.cu's
// kv_append (kv_append_vnorm with QKR_EMU_VNORM): the result and both caches bit for bit, the result
// NaN-poisoned and the caches filled with 0xab first; with QKR_EMU_FF, both rotate by freq factors
// (Gemma 4's rope_freqs: some pairs 1e30, left unrotated), and q against float64 (theta_i / ff[i]).
// Exit status 1 on a difference.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/RopeParams.h"
#undef __CUDACC__
#include "tests/cuda/emulation/KvStoreEmu.h"

float emu_half(unsigned short h) { return f16_to_f32(h); }
void emu_register(const char*, void (*)(const void*)) {}
// What Elementwise.cu's other entries use, never called here.

namespace qkr_emu {
#include "kernels/cuda/Rope.cu"
}
#define KV_WIDTH (ROPE_HEADS_K * ROPE_DIM)
#define KV_HEAD_DIM ROPE_DIM
namespace kv_emu {
#include "kernels/cuda/Elementwise.cu"
}

int main() {
  constexpr int T = QKR_EMU_T, HQ = ROPE_HEADS, HK = ROPE_HEADS_K, D = ROPE_DIM, NROT = ROPE_NROT, W = HK * D;
  constexpr int ROWS = KV_RING > 0 ? KV_RING : 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> N(0.0f, 1.0f);
  std::vector<float> q(T * HQ * D), k(T * W), v(T * W), qw(D), kw(D), ff(NROT / 2);
  for (auto* x : {&q, &k, &v, &qw, &kw})
    for (float& e : *x) e = N(rng);
  // Proportional rope's factors: the upper quarter of the pairs unrotated (1e30), the others 1..4.
  for (int i = 0; i < NROT / 2; ++i) ff[i] = i >= 3 * NROT / 8 ? 1e30f : 1.0f + 3.0f * float(i) / NROT;
  const float* ffp = QKR_EMU_FF ? ff.data() : nullptr;
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = 5 + t + (KV_RING > 0 ? KV_RING : 0);
  const float eps = 1e-6f, v_eps = QKR_EMU_VNORM ? 1e-6f : -1.0f, theta_scale = std::pow(10000.0f, -2.0f / NROT);
  std::vector<unsigned char> kc(emu_kv_bytes<KV_KT>(ROWS * W), 0xab), vc(emu_kv_bytes<KV_VT>(ROWS * W), 0xab);
  std::vector<unsigned char> kc2 = kc, vc2 = vc;
  std::vector<float> qy(q.size(), std::nanf(""));

  QkNormRopeAppendParams p{};
  p.qx = q.data(), p.kx = k.data(), p.vx = v.data(), p.qw = qw.data(), p.kw = kw.data(), p.qy = qy.data();
  p.k_cache = kc.data(), p.v_cache = vc.data(), p.pos = pos.data(), p.freq_factors = ffp;
  p.n_q = T * HQ, p.n_k = T * HK, p.eps = eps, p.theta_scale = theta_scale, p.v_norm_eps = v_eps;
  const unsigned grid = (T * (HQ + 2 * HK) + 7) / 8;
  emu_launch([](const void* a) { qkr_emu::qk_norm_rope_append(*static_cast<const QkNormRopeAppendParams*>(a)); },
             grid > 3 ? grid / 2 : grid, 256, &p);  // fewer blocks than rows: the grid stride too

  // The two launches it replaces.
  std::vector<float> qy2(q.size(), std::nanf("")), ky2(k.size(), std::nanf(""));
  QkNormRopePairParams r{};
  r.qx = q.data(), r.kx = k.data(), r.qw = qw.data(), r.kw = kw.data(), r.qy = qy2.data(), r.ky = ky2.data();
  r.pos = pos.data(), r.freq_factors = ffp, r.n_q = T * HQ, r.n_k = T * HK, r.eps = eps, r.theta_scale = theta_scale;
  emu_launch([](const void* a) { qkr_emu::qk_norm_rope_pair(*static_cast<const QkNormRopePairParams*>(a)); },
             (T * (HQ + HK) + 7) / 8, 256, &r);
  KvAppendParams a{};
  a.k = ky2.data(), a.v = v.data(), a.k_cache = kc2.data(), a.v_cache = vc2.data(), a.pos = pos.data();
  a.n_tok = T, a.v_norm_eps = v_eps;
  if (QKR_EMU_VNORM)
    emu_launch([](const void* x) { kv_emu::kv_append_vnorm(*static_cast<const KvAppendParams*>(x)); }, (T * HK + 7) / 8,
               256, &a);
  else
    emu_launch([](const void* x) { kv_emu::kv_append(*static_cast<const KvAppendParams*>(x)); }, (T * W + 255) / 256,
               256, &a);
  const bool same_q = std::memcmp(qy.data(), qy2.data(), qy.size() * 4) == 0, same_k = kc == kc2, same_v = vc == vc2;

  // q against float64: rope(q / rms(q) * w) with theta_i = pos * 10000^(-2i / NROT) / ff[i].
  double err = 0, ref = 0;
  int bad = 0;
  for (int row = 0; row < T * HQ; ++row) {
    const float* xr = q.data() + (size_t)row * D;
    double ss = 0;
    for (int d = 0; d < D; ++d) ss += double(xr[d]) * xr[d];
    const double s = 1.0 / std::sqrt(ss / D + eps);
    std::vector<double> x(D), o(D);
    for (int d = 0; d < D; ++d) o[d] = x[d] = xr[d] * s * qw[d];
    for (int i = 0; i < NROT / 2; ++i) {
      const double th = pos[row / HQ] * std::pow(10000.0, -2.0 * i / NROT) / (QKR_EMU_FF ? double(ff[i]) : 1.0);
      o[i] = x[i] * std::cos(th) - x[i + NROT / 2] * std::sin(th);
      o[i + NROT / 2] = x[i] * std::sin(th) + x[i + NROT / 2] * std::cos(th);
    }
    for (int d = 0; d < D; ++d) {
      const double g = qy[(size_t)row * D + d];
      bad += !std::isfinite(g);
      err += (g - o[d]) * (g - o[d]);
      ref += o[d] * o[d];
    }
  }
  std::printf(
      "qk_norm_rope_append T %d heads %d/%d D %d n_rot %d kt %d vt %d ring %d vnorm %d ff %d: q %s, k cache %s, "
      "v cache %s the two launches'; q nmse %.3g vs float64%s\n",
      T, HQ, HK, D, NROT, KV_KT, KV_VT, KV_RING, QKR_EMU_VNORM, QKR_EMU_FF, same_q ? "equals" : "DIFFERS from",
      same_k ? "equals" : "DIFFERS from", same_v ? "equals" : "DIFFERS from", err / ref,
      bad ? " (unwritten outputs)" : "");
  return same_q && same_k && same_v && !bad && err / ref < 1e-10 ? 0 : 1;
}
