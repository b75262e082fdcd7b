// kernels/cuda/Gemv.cu's gemv_group_delta_step (matmul_delta_net_step, one token) without a GPU:
// the four input projections of a delta-net layer in key-head order, each key head's step run by
// the block completing its rows (DeltaNetStepTail.cuh), on the host emulation (CudaHostEmulation.h)
// in block order and last block first. Over several tokens (the states carry over), checked against:
//   - with one value head a key head (DNS_HV == DNS_HK), the two launches it replaces, gemv_group
//     then DeltaNet.cu's delta_net_step (whose cluster is then one block): y, the conv state and
//     the delta state equal bit for bit;
//   - always, a float64 reference of the layer (products, conv, silu, l2 norms, gates, the delta
//     rule, the gated norm): y's and the delta state's normalized MSE, the conv windows'
//     normalized MSE;
//   - the tickets zero after every launch; y NaN-poisoned before each.
// Exit status 1 on any difference.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#include "tests/cuda/emulation/DeltaStepReference.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/DeltaNetParams.h"
#include "kernels/cuda/DeltaRuleColumn.cuh"
#include "kernels/cuda/GemvParams.h"
#include "kernels/cuda/KernelParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0.0f; }  // bf16 weights only
void emu_register(const char*, void (*)(const void*)) {}

namespace fused_emu {
#include "kernels/cuda/Gemv.cu"
}
#if DNS_HV == DNS_HK
namespace step_emu {
#include "kernels/cuda/DeltaNet.cu"
}
#endif

namespace {

constexpr int HK = DNS_HK, HV = DNS_HV, DK = DNS_DK, DV = DNS_DV, KC = CONV_K, K = GEMV_K;
constexpr int C = 2 * HK * DK + HV * DV;

struct Layer {
  std::vector<unsigned short> w[4];  // qkv [C, K], z [HV DV, K], beta [HV, K], alpha [HV, K]
  std::vector<float> conv_w, dt_bias, ssm_a, norm_w;
};

struct State {
  std::vector<float> conv, delta;  // [C, KC - 1], [HV, DV, DK]
};

// The layer in float64 over one token: y [HV, DV]; the states advance.
std::vector<double> Reference(const Layer& L, const std::vector<float>& x, std::vector<double>& conv,
                              std::vector<double>& delta, double scale, double qk_eps, double eps) {
  const int rows[4] = {C, HV * DV, HV, HV};
  std::vector<double> p[4];
  for (int m = 0; m < 4; ++m) {
    p[m].assign(rows[m], 0.0);
    for (int r = 0; r < rows[m]; ++r)
      for (int k = 0; k < K; ++k) p[m][r] += double(emu_bf16_float(L.w[m][(size_t)r * K + k])) * x[k];
  }
  return DeltaStepReference<HK, HV, DK, DV, KC>(p[0], p[1], p[2], p[3], L.conv_w, L.dt_bias, L.ssm_a, L.norm_w, conv,
                                                delta, scale, qk_eps, eps);
}

}  // namespace

int main() {
  std::mt19937 rng(41);
  std::normal_distribution<float> G(0.0f, 1.0f);
  Layer L;
  const int rows[4] = {C, HV * DV, HV, HV};
  for (int m = 0; m < 4; ++m) {
    L.w[m].resize((size_t)rows[m] * K);
    for (auto& v : L.w[m]) v = emu_bf16(0.08f * G(rng));
  }
  L.conv_w.resize((size_t)C * KC);
  for (float& v : L.conv_w) v = 0.5f * G(rng);
  for (int h = 0; h < HV; ++h) L.dt_bias.push_back(0.3f * G(rng)), L.ssm_a.push_back(-std::exp(0.5f * G(rng)));
  for (int j = 0; j < DV; ++j) L.norm_w.push_back(1.0f + 0.1f * G(rng));
  const float scale = 1.0f / std::sqrt(float(DK)), qk_eps = 1e-6f, eps = 1e-6f;

  State fused, twice;
  fused.conv.resize((size_t)C * (KC - 1));
  for (float& v : fused.conv) v = G(rng);
  fused.delta.resize((size_t)HV * DV * DK);
  for (float& v : fused.delta) v = 0.1f * G(rng);
  twice = fused;
  std::vector<double> ref_conv(fused.conv.begin(), fused.conv.end()), ref_delta(fused.delta.begin(), fused.delta.end());
  std::vector<unsigned> tickets(HV + HK, 0u);
  std::vector<float> scratch_x(C), scratch_z((size_t)HV * DV), scratch_b(HV), scratch_a(HV);
  constexpr int kRows = HK * DNT_UNIT;
  const unsigned grid = (kRows + GEMV_WARPS - 1) / GEMV_WARPS;
  int fail = 0;
  for (int token = 0; token < 3; ++token) {
    emu_reverse_blocks = token % 2 == 1;  // the completing block differs with the order
    std::vector<float> x(K);
    for (float& v : x) v = G(rng);
    std::vector<float> y((size_t)HV * DV, std::nanf(""));
    GemvDeltaStepParams p{};
    for (int m = 0; m < 4; ++m) p.w[m].w = L.w[m].data();
    p.x = x.data();
    p.ticket = tickets.data();
    p.step.x = scratch_x.data();
    p.step.z = scratch_z.data();
    p.step.b = scratch_b.data();
    p.step.a = scratch_a.data();
    p.step.conv_w = L.conv_w.data();
    p.step.dt_bias = L.dt_bias.data();
    p.step.ssm_a = L.ssm_a.data();
    p.step.norm_w = L.norm_w.data();
    p.step.conv_state = fused.conv.data();
    p.step.delta_state = fused.delta.data();
    p.step.y = y.data();
    p.step.scale = scale;
    p.step.qk_eps = qk_eps;
    p.step.eps = eps;
    emu_launch([](const void* a) { fused_emu::gemv_group_delta_step(*static_cast<const GemvDeltaStepParams*>(a)); },
               grid, GEMV_WARPS * 32, &p);
    emu_reverse_blocks = false;
    for (int u = 0; u < HV + HK; ++u)
      if (tickets[u] != 0) {
        std::printf("  token %d: ticket %d is %u after the launch (not zero)\n", token, u, tickets[u]);
        fail = 1;
      }
    bool same = true;
#if DNS_HV == DNS_HK
    {
      // The two launches: gemv_group into the step's inputs, then delta_net_step.
      std::vector<float> qkv(C, std::nanf("")), z((size_t)HV * DV, std::nanf("")), b(HV, std::nanf("")),
          a(HV, std::nanf("")), y2((size_t)HV * DV, std::nanf(""));
      GemvGroupParams g{};
      for (int m = 0; m < 4; ++m) g.w[m].w = L.w[m].data(), g.n_rows[m] = rows[m];
      g.y[0] = qkv.data(), g.y[1] = z.data(), g.y[2] = b.data(), g.y[3] = a.data();
      g.x = x.data();
      const unsigned ggrid = (C + HV * DV + 2 * HV + GEMV_WARPS - 1) / GEMV_WARPS;
      emu_launch([](const void* a) { fused_emu::gemv_group(*static_cast<const GemvGroupParams*>(a)); }, ggrid,
                 GEMV_WARPS * 32, &g);
      DeltaNetStepParams s = p.step;
      s.x = qkv.data(), s.z = z.data(), s.b = b.data(), s.a = a.data();
      s.conv_state = twice.conv.data();
      s.delta_state = twice.delta.data();
      s.y = y2.data();
      emu_launch([](const void* a) { step_emu::delta_net_step(*static_cast<const DeltaNetStepParams*>(a)); }, HV, 512,
                 &s);
      same = std::memcmp(y.data(), y2.data(), y.size() * 4) == 0 &&
             std::memcmp(fused.conv.data(), twice.conv.data(), fused.conv.size() * 4) == 0 &&
             std::memcmp(fused.delta.data(), twice.delta.data(), fused.delta.size() * 4) == 0;
    }
#endif
    const std::vector<double> r = Reference(L, x, ref_conv, ref_delta, scale, qk_eps, eps);
    double err = 0, ref = 0;
    for (size_t i = 0; i < r.size(); ++i) err += (y[i] - r[i]) * (y[i] - r[i]), ref += r[i] * r[i];
    const double nmse = err / ref;
    double serr = 0, sref = 0;
    for (size_t i = 0; i < ref_delta.size(); ++i)
      serr += (fused.delta[i] - ref_delta[i]) * (fused.delta[i] - ref_delta[i]), sref += ref_delta[i] * ref_delta[i];
    double cerr = 0, cref = 0;  // the conv windows: the products' rows of the last tokens
    for (size_t i = 0; i < ref_conv.size(); ++i)
      cerr += (fused.conv[i] - ref_conv[i]) * (fused.conv[i] - ref_conv[i]), cref += ref_conv[i] * ref_conv[i];
    const double cnmse = cerr / cref;
    std::printf(
        "gemv_group_delta_step HK %d HV %d DK %d DV %d K %d warps %d token %d (%s): %s, y nmse %.3g, "
        "state nmse %.3g, conv nmse %.3g\n",
        HK, HV, DK, DV, K, GEMV_WARPS, token, token % 2 ? "last block first" : "block order",
#if DNS_HV == DNS_HK
        same ? "y and states equal to the two launches'" : "DIFFER from the two launches",
#else
        "(no two-launch twin: its cluster spans blocks)",
#endif
        nmse, serr / sref, cnmse);
    if (!same || !(nmse < 1e-9) || !(serr / sref < 1e-9) || !(cnmse < 1e-9)) fail = 1;
  }
  return fail;
}
