// A delta-net layer's one-token step in float64 (ir/Ops.def delta_net_step: the conv, silu, the q / k
// l2 norms, the gates, the delta rule, the gated rms norm), the reference of the host emulations of
// DeltaNet.cu's delta_net_step (DeltaNetStepEmu) and Gemv.cu's gemv_group_delta_step
// (GemvDeltaStepEmu). x: the conv input [C = 2 HK DK + HV DV]; z [HV DV]; b, a [HV]. The conv
// windows [C, KC - 1] and the delta state [HV, DV, DK] advance; returns y [HV, DV].
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

template <int HK, int HV, int DK, int DV, int KC>
std::vector<double> DeltaStepReference(const std::vector<double>& x, const std::vector<double>& z,
                                       const std::vector<double>& b, const std::vector<double>& a,
                                       const std::vector<float>& conv_w, const std::vector<float>& dt_bias,
                                       const std::vector<float>& ssm_a, const std::vector<float>& norm_w,
                                       std::vector<double>& conv, std::vector<double>& delta, double scale,
                                       double qk_eps, double eps) {
  constexpr int C = 2 * HK * DK + HV * DV;
  std::vector<double> c(C);
  for (int ch = 0; ch < C; ++ch) {
    double s = 0;
    for (int i = 0; i < KC - 1; ++i) s += conv[(size_t)ch * (KC - 1) + i] * conv_w[(size_t)ch * KC + i];
    s += x[ch] * conv_w[(size_t)ch * KC + KC - 1];
    for (int i = 0; i < KC - 2; ++i) conv[(size_t)ch * (KC - 1) + i] = conv[(size_t)ch * (KC - 1) + i + 1];
    conv[(size_t)ch * (KC - 1) + KC - 2] = x[ch];
    c[ch] = s / (1.0 + std::exp(-s));
  }
  auto l2 = [&](const double* v, std::vector<double>& out) {
    double ss = 0;
    for (int i = 0; i < DK; ++i) ss += v[i] * v[i];
    const double inv = 1.0 / std::max(std::sqrt(ss), qk_eps);
    out.resize(DK);
    for (int i = 0; i < DK; ++i) out[i] = v[i] * inv;
  };
  std::vector<double> y((size_t)HV * DV);
  for (int h = 0; h < HV; ++h) {
    const int kh = h % HK;
    std::vector<double> q, k;
    l2(&c[(size_t)kh * DK], q);
    l2(&c[(size_t)HK * DK + kh * DK], k);
    const double* v = &c[(size_t)2 * HK * DK + h * DV];
    const double beta = 1.0 / (1.0 + std::exp(-b[h]));
    const double ah = a[h] + dt_bias[h];
    const double sp = ah > 20 ? ah : std::log1p(std::exp(ah));
    const double decay = std::exp(sp * ssm_a[h]);
    std::vector<double> o(DV);
    for (int j = 0; j < DV; ++j) {
      double* S = &delta[((size_t)h * DV + j) * DK];
      double dot = 0;
      for (int i = 0; i < DK; ++i) S[i] *= decay, dot += S[i] * k[i];
      const double d = (v[j] - dot) * beta;
      double out = 0;
      for (int i = 0; i < DK; ++i) S[i] += k[i] * d, out += S[i] * q[i];
      o[j] = out * scale;
    }
    double ss = 0;
    for (int j = 0; j < DV; ++j) ss += o[j] * o[j];
    const double rs = 1.0 / std::sqrt(ss / DV + eps);
    for (int j = 0; j < DV; ++j) {
      const double zj = z[(size_t)h * DV + j];
      y[(size_t)h * DV + j] = o[j] * rs * norm_w[j] * (zj / (1.0 + std::exp(-zj)));
    }
  }
  return y;
}
