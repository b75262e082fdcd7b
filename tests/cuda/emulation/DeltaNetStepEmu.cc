// kernels/cuda/DeltaNet.cu's delta_net_step (one token of a delta-net layer) without a GPU, its
// value heads' state columns over DNS_SPLIT blocks (select-kernels{delta-step-split}) with the
// DNS_HV / DNS_HK heads of a key head and their column blocks one thread-block cluster, on the
// host emulation (CudaHostEmulation.h emu_launch_cluster: a cluster's blocks at once, the cluster
// barrier and distributed shared memory emulated), clusters in order and last first. Over four
// tokens (the states carry over), y NaN-poisoned before each, checked against a float64 reference
// of the step (conv, silu, l2 norms, gates, the delta rule, the gated norm): y's, the delta
// state's and the conv windows' normalized MSE. Exit status 1 on any difference.
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
#include "kernels/cuda/KernelParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0.0f; }  // no 16-bit weights here
void emu_register(const char*, void (*)(const void*)) {}

namespace step_emu {
#include "kernels/cuda/DeltaNet.cu"
}

namespace {

constexpr int HK = DNS_HK, HV = DNS_HV, DK = DNS_DK, DV = DNS_DV, KC = CONV_K;
constexpr int C = 2 * HK * DK + HV * DV;

struct Layer {
  std::vector<float> conv_w, dt_bias, ssm_a, norm_w;
};

struct Token {
  std::vector<float> x, z, b, a;  // [C], [HV DV], [HV], [HV]
};

// The step in float64 (DeltaStepReference.h): y [HV, DV]; the states advance.
std::vector<double> Reference(const Layer& L, const Token& t, std::vector<double>& conv, std::vector<double>& delta,
                              double scale, double qk_eps, double eps) {
  auto wide = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  return DeltaStepReference<HK, HV, DK, DV, KC>(wide(t.x), wide(t.z), wide(t.b), wide(t.a), L.conv_w, L.dt_bias,
                                                L.ssm_a, L.norm_w, conv, delta, scale, qk_eps, eps);
}

template <class A, class B>
double Nmse(const A& got, const B& ref) {
  double err = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - double(ref[i]);
    err += d * d, den += double(ref[i]) * double(ref[i]);
  }
  return err / den;
}

}  // namespace

int main() {
  std::mt19937 rng(43);
  std::normal_distribution<float> G(0.0f, 1.0f);
  Layer L;
  L.conv_w.resize((size_t)C * KC);
  for (float& v : L.conv_w) v = 0.5f * G(rng);
  for (int h = 0; h < HV; ++h) L.dt_bias.push_back(0.3f * G(rng)), L.ssm_a.push_back(-std::exp(0.5f * G(rng)));
  for (int j = 0; j < DV; ++j) L.norm_w.push_back(1.0f + 0.1f * G(rng));
  const float scale = 1.0f / std::sqrt(float(DK)), qk_eps = 1e-6f, eps = 1e-6f;

  std::vector<float> conv((size_t)C * (KC - 1)), delta((size_t)HV * DV * DK);
  for (float& v : conv) v = G(rng);
  for (float& v : delta) v = 0.1f * G(rng);
  std::vector<double> ref_conv(conv.begin(), conv.end()), ref_delta(delta.begin(), delta.end());
  const unsigned grid = HV * DNS_SPLIT, cluster = (HV / HK) * DNS_SPLIT;
  int fail = 0;
  for (int token = 0; token < 4; ++token) {
    emu_reverse_blocks = token % 2 == 1;
    Token t;
    for (int i = 0; i < C; ++i) t.x.push_back(G(rng));
    for (int i = 0; i < HV * DV; ++i) t.z.push_back(G(rng));
    for (int h = 0; h < HV; ++h) t.b.push_back(G(rng)), t.a.push_back(G(rng));
    std::vector<float> y((size_t)HV * DV, std::nanf(""));
    DeltaNetStepParams p{};
    p.x = t.x.data();
    p.conv_w = L.conv_w.data();
    p.b = t.b.data();
    p.a = t.a.data();
    p.dt_bias = L.dt_bias.data();
    p.ssm_a = L.ssm_a.data();
    p.z = t.z.data();
    p.norm_w = L.norm_w.data();
    p.conv_state = conv.data();
    p.delta_state = delta.data();
    p.y = y.data();
    p.scale = scale;
    p.qk_eps = qk_eps;
    p.eps = eps;
    emu_launch_cluster([](const void* a) { step_emu::delta_net_step(*static_cast<const DeltaNetStepParams*>(a)); },
                       grid, DNS_THREADS, cluster, &p);
    emu_reverse_blocks = false;
    const std::vector<double> r = Reference(L, t, ref_conv, ref_delta, scale, qk_eps, eps);
    bool finite = true;
    for (float v : y) finite &= std::isfinite(v);
    const double ny = Nmse(y, r), ns = Nmse(delta, ref_delta), nc = Nmse(conv, ref_conv);
    std::printf(
        "delta_net_step HK %d HV %d DK %d DV %d split %d (%d threads, cluster %u) token %d (%s): y nmse %.3g%s, "
        "state nmse %.3g, conv nmse %.3g\n",
        HK, HV, DK, DV, DNS_SPLIT, DNS_THREADS, cluster, token, token % 2 ? "last cluster first" : "cluster order", ny,
        finite ? "" : " (NON-FINITE: an output never written)", ns, nc);
    if (!finite || !(ny < 1e-9) || !(ns < 1e-9) || !(nc < 1e-12)) fail = 1;
  }
  return fail;
}
