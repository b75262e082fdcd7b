// Elementwise.cu's kv_append_vnorm (kv_append with v_norm_eps: the values' weightless RMS norm in
// the append, fuse-kv-append-norm) without a GPU, on the host emulation (CudaHostEmulation.h) with
// the KV_* -D constants of the compile: KVN_EMU_T tokens at positions 3, 4, ... (a ring's rows
// when KV_RING is set). Checked against the two-launch form it replaces (Norm.cu's rms_norm in
// warp rows into a buffer, then kv_append from it), cache bytes equal bit for bit, the caches
// poisoned first; and the rows no token writes untouched. Exit status 1 on a difference.
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
#include "kernels/cuda/NormParams.h"
#undef __CUDACC__
#include "tests/cuda/emulation/KvStoreEmu.h"

float emu_half(unsigned short h) { return f16_to_f32(h); }
void emu_register(const char*, void (*)(const void*)) {}
// What Norm.cu's other entries use (greedy_next), never called here (__ldcg, atomicAdd and
// __threadfence come from CudaHostEmulation.h).
// What Elementwise.cu's other entries use (the vectorized casts and GLUs), never called here.

namespace kv_emu {
#include "kernels/cuda/Elementwise.cu"
}
#define NORM_COLS KV_HEAD_DIM
#define NORM_BLOCK 256
#define NORM_WARP_ROWS 1
namespace norm_emu {
#include "kernels/cuda/Norm.cu"
}

int main() {
  constexpr int T = KVN_EMU_T, D = KV_HEAD_DIM, W = KV_WIDTH, H = W / D;
  constexpr int ROWS = KV_RING > 0 ? KV_RING : 64;
  std::mt19937 rng(3);
  std::normal_distribution<float> N(0.0f, 2.0f);
  std::vector<float> k(T * W), v(T * W);
  for (float& x : k) x = N(rng);
  for (float& x : v) x = N(rng);
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = 3 + t + (KV_RING > 0 ? KV_RING : 0);  // past the ring's first lap
  const float eps = 1e-6f;
  std::vector<unsigned char> kc(emu_kv_bytes<KV_KT>(ROWS * W), 0xab), vc(emu_kv_bytes<KV_VT>(ROWS * W), 0xab);
  std::vector<unsigned char> kc2 = kc, vc2 = vc;
  // The fused append.
  KvAppendParams p{};
  p.k = k.data(), p.v = v.data(), p.k_cache = kc.data(), p.v_cache = vc.data(), p.pos = pos.data();
  p.n_tok = T, p.v_norm_eps = eps;
  emu_launch([](const void* a) { kv_emu::kv_append_vnorm(*static_cast<const KvAppendParams*>(a)); },
             (T * H + 7) / 8 > 1 ? (T * H + 7) / 16 : 1, 256, &p);  // fewer blocks than rows: the grid stride
  // The two-launch form: rms_norm (warp rows) into vn, then kv_append.
  std::vector<float> vn(v.size(), std::nanf(""));
  NormParams n{};
  n.x = v.data(), n.y = vn.data(), n.n_rows = T * H, n.eps = eps;
  emu_launch([](const void* a) { norm_emu::rms_norm(*static_cast<const NormParams*>(a)); }, (T * H + 7) / 8, 256, &n);
  KvAppendParams q = p;
  q.v = vn.data(), q.k_cache = kc2.data(), q.v_cache = vc2.data();
  emu_launch([](const void* a) { kv_emu::kv_append(*static_cast<const KvAppendParams*>(a)); }, (T * W + 255) / 256, 256,
             &q);
  const bool same_k = kc == kc2, same_v = vc == vc2;
  // The norm itself against float64 (so both forms are not wrong alike).
  double err = 0, ref = 0;
  for (int r = 0; r < T * H; ++r) {
    double ss = 0;
    for (int d = 0; d < D; ++d) ss += double(v[r * D + d]) * v[r * D + d];
    const double s = 1.0 / std::sqrt(ss / D + eps);
    for (int d = 0; d < D; ++d) {
      const double want = v[r * D + d] * s, got = vn[r * D + d];
      err += (got - want) * (got - want);
      ref += want * want;
    }
  }
  std::printf(
      "kv_append_vnorm T %d heads %d D %d kt %d vt %d ring %d: k cache %s, v cache %s the two-launch form's; "
      "norm nmse %.3g vs float64\n",
      T, H, D, KV_KT, KV_VT, KV_RING, same_k ? "equals" : "DIFFERS from", same_v ? "equals" : "DIFFERS from",
      err / ref);
  return same_k && same_v && err / ref < 1e-12 ? 0 : 1;
}
