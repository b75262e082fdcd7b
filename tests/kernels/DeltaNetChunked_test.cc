// GatedDeltaScanChunked (the WY form the tensor-core prefill kernel will run) against a float64
// sequential loop and against the f32 sequential scan: within rounding at the 9B head size, with
// partial chunks, strong and no decay, chunk sizes 16 / 64; and the grid law: a call split at a
// multiple of the chunk gives the same bits as one call.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/DeltaNet.h"
#include "kernels/cpu/DeltaNetChunked.h"
#include "kernels/cpu/ThreadPool.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cpu {
namespace {

using memra::testing::RandomNormal;

struct Inputs {
  int64_t T, Hk, Hv, dk, dv;
  std::vector<float> q, k, v, g, beta, s0;
  float scale;
};

// l2-normalized q and k (as the model feeds the scan), log decays g = -decay_scale * |n|, beta in (0, 1).
Inputs Make(int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, float decay_scale, uint64_t seed) {
  Inputs in{T, Hk, Hv, dk, dv, {}, {}, {}, {}, {}, {}, 1.0f / std::sqrt(float(dk))};
  in.q = RandomNormal(T * Hk * dk, seed);
  in.k = RandomNormal(T * Hk * dk, seed + 1);
  for (auto* x : {&in.q, &in.k})
    for (int64_t r = 0; r < T * Hk; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dk; ++i) ss += double((*x)[r * dk + i]) * (*x)[r * dk + i];
      for (int64_t i = 0; i < dk; ++i) (*x)[r * dk + i] = float((*x)[r * dk + i] / std::sqrt(ss));
    }
  in.v = RandomNormal(T * Hv * dv, seed + 2);
  const auto graw = RandomNormal(T * Hv, seed + 3), braw = RandomNormal(T * Hv, seed + 4);
  in.g.resize(T * Hv);
  in.beta.resize(T * Hv);
  for (int64_t i = 0; i < T * Hv; ++i) {
    in.g[i] = -decay_scale * std::fabs(graw[i]);
    in.beta[i] = 1.0f / (1.0f + std::exp(-braw[i]));
  }
  in.s0 = RandomNormal(Hv * dv * dk, seed + 5, 0.2f);
  return in;
}

// The sequential rule in float64: outputs [T][Hv*dv] and the final state (ggml layout).
void Reference(const Inputs& in, std::vector<double>& out, std::vector<double>& state) {
  out.assign(in.T * in.Hv * in.dv, 0.0);
  state.assign(in.s0.begin(), in.s0.end());
  for (int64_t h = 0; h < in.Hv; ++h) {
    const int64_t kh = h % in.Hk;
    double* S = state.data() + h * in.dv * in.dk;
    for (int64_t t = 0; t < in.T; ++t) {
      const float* kt = in.k.data() + (t * in.Hk + kh) * in.dk;
      const float* qt = in.q.data() + (t * in.Hk + kh) * in.dk;
      const double decay = std::exp(double(in.g[t * in.Hv + h])), b = in.beta[t * in.Hv + h];
      for (int64_t j = 0; j < in.dv; ++j) {
        double* col = S + j * in.dk;
        double sk = 0;
        for (int64_t i = 0; i < in.dk; ++i) sk += (col[i] *= decay) * kt[i];
        const double d = (in.v[(t * in.Hv + h) * in.dv + j] - sk) * b;
        double sq = 0;
        for (int64_t i = 0; i < in.dk; ++i) sq += (col[i] += kt[i] * d) * qt[i];
        out[(t * in.Hv + h) * in.dv + j] = sq * in.scale;
      }
    }
  }
}

double Nmse(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? num / den : num;
}

struct ScanResult {
  std::vector<float> out, state;
};

ScanResult Chunked(const Inputs& in, int64_t chunk, ThreadPool* pool = nullptr, int64_t t_begin = 0, int64_t t_end = -1,
                   const std::vector<float>* from = nullptr) {
  if (t_end < 0) t_end = in.T;
  ScanResult r{std::vector<float>((t_end - t_begin) * in.Hv * in.dv), from ? *from : in.s0};
  GatedDeltaScanChunked(in.q.data() + t_begin * in.Hk * in.dk, in.k.data() + t_begin * in.Hk * in.dk,
                        in.v.data() + t_begin * in.Hv * in.dv, in.g.data() + t_begin * in.Hv,
                        in.beta.data() + t_begin * in.Hv, t_end - t_begin, in.Hk, in.Hv, in.dk, in.dv, in.scale,
                        r.state.data(), r.out.data(), chunk, pool);
  return r;
}

TEST(GatedDeltaScanChunked, MatchesTheSequentialRule) {
  ThreadPool pool(2);
  for (const float decay : {0.0f, 0.1f, 1.0f, 20.0f}) {       // none, mild, strong, all but gone
    for (const int64_t chunk : {int64_t{16}, int64_t{64}}) {  // 150 tokens: full and partial chunks
      const Inputs in = Make(150, 2, 4, 32, 24, decay, 11);
      std::vector<double> ref_out, ref_state;
      Reference(in, ref_out, ref_state);
      const ScanResult c = Chunked(in, chunk, &pool);
      std::vector<float> seq_out(c.out.size()), seq_state = in.s0;
      GatedDeltaScan(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.T, in.Hk, in.Hv, in.dk,
                     in.dv, in.scale, seq_state.data(), seq_out.data());
      const double chunked = Nmse(c.out, ref_out), sequential = Nmse(seq_out, ref_out);
      EXPECT_LT(chunked, 1e-11) << "decay " << decay << " chunk " << chunk;
      EXPECT_LT(Nmse(c.state, ref_state), 1e-11) << "decay " << decay << " chunk " << chunk;
      std::printf("  decay %5.2f chunk %2ld: output nmse %.2e (the f32 sequential scan: %.2e)\n", decay, long(chunk),
                  chunked, sequential);
      for (float x : c.out) ASSERT_TRUE(std::isfinite(x));
    }
  }
}

// The 9B's head (d_k = d_v = 128) over 512 tokens: the error the chunked form costs in f32.
TEST(GatedDeltaScanChunked, NineBHeadSize) {
  const Inputs in = Make(512, 1, 2, 128, 128, 0.05f, 21);
  std::vector<double> ref_out, ref_state;
  Reference(in, ref_out, ref_state);
  ThreadPool pool(2);
  const ScanResult c = Chunked(in, 64, &pool);
  const double e = Nmse(c.out, ref_out), s = Nmse(c.state, ref_state);
  std::printf("  d_k = d_v = 128, T = 512, chunk 64: output nmse %.2e, state nmse %.2e vs float64\n", e, s);
  EXPECT_LT(e, 1e-10);
  EXPECT_LT(s, 1e-10);
}

// The grid law: split at multiples of the chunk, the same bits as one call; split elsewhere,
// the same values up to rounding.
TEST(GatedDeltaScanChunked, GridLaw) {
  const Inputs in = Make(200, 2, 2, 16, 16, 0.2f, 31);
  const ScanResult whole = Chunked(in, 64);
  const ScanResult a = Chunked(in, 64, nullptr, 0, 128);
  const ScanResult b = Chunked(in, 64, nullptr, 128, 200, &a.state);
  EXPECT_EQ(0, std::memcmp(a.out.data(), whole.out.data(), a.out.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(b.out.data(), whole.out.data() + a.out.size(), b.out.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(b.state.data(), whole.state.data(), b.state.size() * sizeof(float)));
  const ScanResult c = Chunked(in, 64, nullptr, 0, 100);
  const ScanResult d = Chunked(in, 64, nullptr, 100, 200, &c.state);
  std::vector<double> joined(c.out.begin(), c.out.end());
  joined.insert(joined.end(), d.out.begin(), d.out.end());
  EXPECT_LT(Nmse(whole.out, joined), 1e-12);
}

}  // namespace
}  // namespace memra::kernels::cpu
