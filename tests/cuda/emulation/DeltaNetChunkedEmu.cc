// kernels/cuda/DeltaNetChunked.cu without a GPU: gdn_chunk_prep then gdn_chunk_scan (the GDN_* -D
// constants of the compile, deltanet_chunked_run.sh) on the host emulation (CudaHostEmulation.h)
// over two calls (the second continues the first's state), against the sequential gated delta
// rule in float64. Outputs are poisoned with NaN first. Prints the normalized MSE of the outputs
// and the final state; exit status 1 past the bound.
#include <cstdio>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#include "tests/cuda/emulation/MmaEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/DeltaNetParams.h"
#include "kernels/cuda/KernelParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0; }  // not used by these kernels
void emu_register(const char*, void (*)(const void*)) {}

#define MEMRA_MMA_HOST_EMULATION 1
#define f32_to_bf16 emu_bf16
namespace gdn_emu {
#include "kernels/cuda/DeltaNetChunked.cu"
}

int main() {
  constexpr int HK = GDN_HK, HV = GDN_HV, DK = GDN_DK, DV = GDN_DV;
  const int calls[2] = {GDN_EMU_T1, GDN_EMU_T2};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> U(-1, 1), G(-0.5f, 0.0f), B(0.0f, 1.0f);
  std::vector<float> state(HV * DV * DK);
  for (float& x : state) x = 0.1f * U(rng);
  std::vector<double> ref_state(state.begin(), state.end());  // S[h][j][i]
  const float scale = 1.0f / std::sqrt(static_cast<float>(DK)), eps = 1e-6f;
  double err = 0, ref = 0;
  int bad = 0;
  for (int call = 0; call < 2; ++call) {
    const int T = calls[call];
    std::vector<float> q(T * HK * DK), k(T * HK * DK), v(T * HV * DV), g(T * HV), beta(T * HV),
        o(T * HV * DV, std::nanf(""));
    for (float& x : q) x = U(rng);
    for (float& x : k) x = U(rng);
    for (float& x : v) x = U(rng);
    for (float& x : g) x = G(rng);
    for (float& x : beta) x = B(rng);
    const int chunks = (T + GDN_C - 1) / GDN_C + 1;  // the bucket: one chunk more than the call
    std::vector<float> scratch(static_cast<size_t>(chunks) * HV * GDN_SCR_PER, std::nanf(""));
    GdnChunkParams p;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.g = g.data(), p.beta = beta.data();
    p.state = state.data(), p.o = o.data(), p.scratch = scratch.data();
    p.n_tok = T, p.scale = scale, p.qk_eps = eps;
    emu_launch([](const void* a) { gdn_emu::gdn_chunk_prep(*static_cast<const GdnChunkParams*>(a)); }, HV * chunks,
               GDN_PREP_THREADS, &p);
#if GDN_BF16
    constexpr int cols = GDN_NC;
#else
    constexpr int cols = GDN_COLS;
#endif
    emu_launch([](const void* a) { gdn_emu::gdn_chunk_scan(*static_cast<const GdnChunkParams*>(a)); }, HV * (DV / cols),
               GDN_SCAN_THREADS, &p);
    // The sequential rule in float64.
    for (int h = 0; h < HV; ++h) {
      const int kh = h % HK;
      double* S = ref_state.data() + static_cast<size_t>(h) * DV * DK;
      for (int t = 0; t < T; ++t) {
        std::vector<double> kt(DK), qt(DK);
        double kk = 0, qq = 0;
        for (int i = 0; i < DK; ++i) {
          kt[i] = k[(t * HK + kh) * DK + i], qt[i] = q[(t * HK + kh) * DK + i];
          kk += kt[i] * kt[i], qq += qt[i] * qt[i];
        }
        const double ik = GDN_L2 ? 1.0 / std::max(std::sqrt(kk), (double)eps) : 1.0;
        const double iq = GDN_L2 ? 1.0 / std::max(std::sqrt(qq), (double)eps) : 1.0;
        const double decay = std::exp((double)g[t * HV + h]), b = beta[t * HV + h];
        for (int j = 0; j < DV; ++j) {
          double* col = S + static_cast<size_t>(j) * DK;
          double sk = 0;
          for (int i = 0; i < DK; ++i) sk += (col[i] *= decay) * kt[i] * ik;
          const double u = b * (v[(t * HV + h) * DV + j] - sk);
          double out = 0;
          for (int i = 0; i < DK; ++i) out += (col[i] += kt[i] * ik * u) * qt[i] * iq;
          const double want = out * scale, got = o[(t * HV + h) * DV + j];
          if (!std::isfinite(got)) {
            ++bad;
            continue;
          }
          err += (got - want) * (got - want), ref += want * want;
        }
      }
    }
  }
  double serr = 0, sref = 0;
  for (size_t i = 0; i < state.size(); ++i)
    serr += (state[i] - ref_state[i]) * (state[i] - ref_state[i]), sref += ref_state[i] * ref_state[i];
  std::printf(
      "gdn_chunk emu HK=%d HV=%d DK=%d DV=%d COLS=%d L2=%d BF16=%d T=%d+%d: output nmse %.3g, state nmse %.3g%s\n", HK,
      HV, DK, DV, GDN_COLS, GDN_L2, GDN_BF16, calls[0], calls[1], err / ref, serr / sref, bad ? " NON-FINITE" : "");
  // f32: rounding only; bf16 operands (the tensor-core pass): ~1e-5 expected.
  const double bound = GDN_BF16 ? 1e-4 : 1e-10;
  return bad == 0 && err / ref < bound && serr / sref < bound ? 0 : 1;
}
