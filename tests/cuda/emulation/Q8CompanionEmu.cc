// The q8 companions (kernels/cuda/Q8Companion.h) without a GPU: one producer kernel, compiled with
// the Q8E_* / kernel -D constants of q8companion_run.sh, runs on the host emulation
// (CudaHostEmulation.h) into an output poisoned with 0xff bytes (NaN values, -1 int8) and a guard
// past it. Checked: the f32 rows against a float64 reference; the companion equal, byte for
// byte, to gemv_q_quantize_x's layout of the kernel's own f32 rows (q = round(x / d), d = amax /
// 127, the per-16 sums; what the products would otherwise read); the rows past the call and the
// guard untouched. Exit status 1 on any difference.
//
//   Q8E_KIND 1 rms_norm, 2 add_rms_norm, 3 gated_rms_norm (Norm.cu); 4 fused_rows, 5
//            fused_rows_pointwise (FusedRows.cu: rms_norm(a0) * a1 + a2 / a0 + a1, yield 1 / 0)
//   Q8E_COLS, Q8E_ROWS (the companion's rows: MEMRA_Q8X_ELEMS = Q8E_ROWS * Q8E_COLS), Q8E_NROWS
//   (the call's), Q8E_BLOCK, Q8E_GRID; the kernel's own defines (NORM_*, FR_*) and MEMRA_Q8X_OFF.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#include "tests/cuda/emulation/Q8xReference.h"
#define __host__  // FusedRows.cu's fr_slot is __host__ __device__
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/FusedRowsParams.h"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/NormParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0; }  // not used by these kernels
void emu_register(const char*, void (*)(const void*)) {}
// What Norm.cu's other entries use (greedy_next), never called here (__ldcg, atomicAdd and
// __threadfence come from CudaHostEmulation.h).

namespace q8e {
#if Q8E_KIND <= 3
#include "kernels/cuda/Norm.cu"
#else
#include "kernels/cuda/FusedRows.cu"
#endif
}  // namespace q8e

namespace {

constexpr int C = Q8E_COLS, R = Q8E_ROWS, N = Q8E_NROWS;
constexpr size_t kOff = MEMRA_Q8X_OFF;
constexpr size_t kQ8Bytes = size_t{R} * C + size_t{R} * (C / 32) * 4 + size_t{R} * (C / 16) * 4;
static_assert(MEMRA_Q8X_ELEMS == R * C, "the companion's values: the rows it was made for");
constexpr size_t kGuard = 512;
constexpr float kEps = 1e-6f;

double RmsScale(const double* v) {
  double ss = 0;
  for (int c = 0; c < C; ++c) ss += v[c] * v[c];
  return 1.0 / std::sqrt(ss / C + kEps);
}

}  // namespace

int main() {
  std::mt19937 rng(Q8E_KIND * 1000 + C + R);
  std::uniform_real_distribution<float> U(-2, 2);
  auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = U(rng);
  };
  std::vector<float> a(size_t{R} * C), b(size_t{R} * C), w(C), w2(C);
  fill(a), fill(b), fill(w), fill(w2);
  // A group of zeros (d = 0) and one of equal magnitudes (ties at the rounding) in row 0.
  for (int c = 0; c < 32 && C >= 64; ++c) a[32 + c] = 0.0f, b[32 + c] = 0.0f;
  // The output: f32 rows, the companion at kOff, a guard; all 0xff.
  std::vector<unsigned char> y(kOff + kQ8Bytes + kGuard, 0xff), sum(size_t{R} * C * 4 + kGuard, 0xff);
  float* yf = reinterpret_cast<float*>(y.data());
  std::vector<double> ref(size_t{N} * C);
#if Q8E_KIND <= 3
  NormParams p{};
  p.x = a.data(), p.z = b.data(), p.w = w.data(), p.y = yf, p.sum = reinterpret_cast<float*>(sum.data());
  p.n_rows = N, p.eps = kEps;
  emu_launch(
      [](const void* q) {
        const NormParams& np = *static_cast<const NormParams*>(q);
#if Q8E_KIND == 1
        q8e::rms_norm(np);
#elif Q8E_KIND == 2
        q8e::add_rms_norm(np);
#else
        q8e::gated_rms_norm(np);
#endif
      },
      Q8E_GRID, Q8E_BLOCK, &p);
  for (int r = 0; r < N; ++r) {
    std::vector<double> v(C);
    for (int c = 0; c < C; ++c) v[c] = Q8E_KIND == 2 ? double(a[r * C + c]) + b[r * C + c] : a[r * C + c];
    const double s = RmsScale(v.data());
    for (int c = 0; c < C; ++c) {
      double o = v[c] * s * w[c];
      if (Q8E_KIND == 3) o *= b[r * C + c] / (1.0 + std::exp(-double(b[r * C + c])));
      ref[r * C + c] = o;
    }
  }
#else
  FusedRowsParams p{};
  std::vector<unsigned char> other(size_t{R} * C * 4 + kGuard, 0xff);
#if Q8E_KIND == 4
  p.x[0] = a.data(), p.x[1] = w.data(), p.x[2] = b.data();
  p.y[0] = reinterpret_cast<float*>(other.data()), p.y[1] = yf;
#else
  p.x[0] = a.data(), p.x[1] = b.data();
  p.y[0] = yf;
#endif
  p.n_rows = N;
  emu_launch(
      [](const void* q) {
        const FusedRowsParams& fp = *static_cast<const FusedRowsParams*>(q);
#if Q8E_KIND == 4
        q8e::fused_rows(fp);
#else
        q8e::fused_rows_pointwise(fp);
#endif
      },
      Q8E_GRID, Q8E_BLOCK, &p);
  for (int r = 0; r < N; ++r) {
    std::vector<double> v(a.begin() + r * C, a.begin() + (r + 1) * C);
    const double s = Q8E_KIND == 4 ? RmsScale(v.data()) : 0;
    for (int c = 0; c < C; ++c)
      ref[r * C + c] = Q8E_KIND == 4 ? v[c] * s * w[c] + b[r * C + c] : double(a[r * C + c]) + double(b[r * C + c]);
  }
#endif
  int bad = 0;
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (yf[i] - ref[i]) * (yf[i] - ref[i]);
    norm += ref[i] * ref[i];
    if (!(std::fabs(yf[i] - ref[i]) <= 1e-5 * (1 + std::fabs(ref[i])))) ++bad;
  }
  // Rows past the call and the padding before the companion: untouched.
  for (size_t i = size_t{N} * C * 4; i < kOff; ++i) bad += y[i] != 0xff;
  std::vector<unsigned char> want(kQ8Bytes, 0xff);
  EmuQ8xReference(yf, size_t{R} * C, size_t{N} * C, want.data());
  int diff = 0, first = -1;
  for (size_t i = 0; i < kQ8Bytes; ++i)
    if (y[kOff + i] != want[i]) {
      if (first < 0) first = static_cast<int>(i);
      ++diff;
    }
  for (size_t i = 0; i < kGuard; ++i) bad += y[kOff + kQ8Bytes + i] != 0xff;
  std::printf(
      "q8 companion kind %d cols %d rows %d/%d block %d: f32 nmse %.2e, %d bad values, %d companion bytes differ%s\n",
      Q8E_KIND, C, N, R, Q8E_BLOCK, norm > 0 ? err / norm : 0.0, bad, diff,
      first >= 0 ? (" (first at byte " + std::to_string(first) + ")").c_str() : "");
  return bad == 0 && diff == 0 ? 0 : 1;
}
