// kernels/cuda/Gemv.cu's gemv_splitk_route (moe_router, one token) without a GPU: the router's
// f32 product by gemv_splitk's blocks into the logits, then the launch's last block routing them
// (MoeRoute.cuh, as moe_route or with MR_SIGMOID moe_route_sigmoid computes it), on the host
// emulation (CudaHostEmulation.h: blocks one after another, so the last block is the grid's last).
// Checked over several launches on one ticket word: the logits against a float64 product, the
// ids exactly and the weights (1e-6 relative) against a float64 routing of the launch's own
// logits, the ticket zero again after every launch, ids / weights NaN-poisoned before each.
// Exit status 1 on any difference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GemvParams.h"
#include "kernels/cuda/KernelParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0.0f; }  // f32 weights only
void emu_register(const char*, void (*)(const void*)) {}

namespace route_emu {
#include "kernels/cuda/Gemv.cu"
}

#ifndef MR_SIGMOID
#define MR_SIGMOID 0
#endif
#ifndef MR_EMU_SCALE
#define MR_EMU_SCALE 1.0f
#endif

int main() {
  constexpr int E = MR_E, K = GEMV_K, k = MR_K;
  std::mt19937 rng(23);
  std::normal_distribution<float> N(0.0f, 1.0f);
  std::vector<float> w((size_t)E * K), per(E);
  for (float& x : w) x = 0.05f * N(rng);
  for (float& x : per) x = MR_SIGMOID ? 0.1f * N(rng) : 0.5f + 0.5f * std::fabs(N(rng));  // bias, or output scales
  unsigned ticket = 0;
  int fail = 0;
  for (int launch = 0; launch < 4; ++launch) {
    std::vector<float> x(K), logits(E, std::nanf("")), weights(k, std::nanf(""));
    std::vector<int> ids(k, -1);
    for (float& v : x) v = N(rng);
    GemvRouteParams p{};
    p.g.w.w = w.data();
    p.g.x = x.data();
    p.g.y = logits.data();
    p.g.n_rows = E;
    p.weights = weights.data();
    p.ids = ids.data();
    p.per_expert = launch % 2 == 0 ? per.data() : nullptr;  // with and without the per-expert values
    p.ticket = &ticket;
    p.scale = MR_EMU_SCALE;
    const unsigned grid = (E + GEMV_WARPS / 2 - 1) / (GEMV_WARPS / 2);  // a warp pair a row
    emu_launch([](const void* a) { route_emu::gemv_splitk_route(*static_cast<const GemvRouteParams*>(a)); }, grid,
               GEMV_WARPS * 32, &p);
    if (ticket != 0) {
      std::printf("  launch %d: the ticket is %u after the launch (not zero)\n", launch, ticket);
      fail = 1;
    }
    double lerr = 0, lref = 0;
    for (int e = 0; e < E; ++e) {
      double d = 0;
      for (int c = 0; c < K; ++c) d += double(w[(size_t)e * K + c]) * x[c];
      lerr += (logits[e] - d) * (logits[e] - d);
      lref += d * d;
    }
    // The routing of the launch's own logits in float64.
    std::vector<double> prob(E), score(E);
    if (MR_SIGMOID) {
      for (int e = 0; e < E; ++e) {
        prob[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
        score[e] = prob[e] + (p.per_expert ? per[e] : 0.0);
      }
    } else {
      const double mx = *std::max_element(logits.begin(), logits.end());
      double s = 0;
      for (int e = 0; e < E; ++e) s += prob[e] = std::exp(logits[e] - mx);
      for (int e = 0; e < E; ++e) score[e] = prob[e] /= s;
    }
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
    double total = 0;
    for (int j = 0; j < k; ++j) total += prob[order[j]];
    total = std::max(total, 6.103515625e-5);
    double werr = 0;
    int id_diff = 0;
    for (int j = 0; j < k; ++j) {
      id_diff += ids[j] != order[j];
      double want = prob[order[j]];
      if (!MR_SIGMOID || MR_NORM) want /= total;
      if (MR_SIGMOID) want *= MR_EMU_SCALE;
      if (!MR_SIGMOID && p.per_expert) want *= per[order[j]];
      const double rel = std::fabs(weights[j] - want) / std::fabs(want);
      werr = std::isnan(rel) || std::isnan(werr) ? NAN : std::max(werr, rel);  // an unwritten weight shows
    }
    const double nmse = lerr / lref;
    std::printf(
        "gemv_splitk_route E %d K %d k %d sigmoid %d norm %d per-expert %d launch %d: logits nmse %.3g, "
        "ids differ %d, weights max rel %.3g\n",
        E, K, k, MR_SIGMOID, MR_NORM, p.per_expert != nullptr, launch, nmse, id_diff, werr);
    if (!(nmse < 1e-10) || id_diff != 0 || !(werr < 1e-6)) fail = 1;
  }
  return fail;
}
