// kernels/cuda/AddNormTail.cuh's add_rms_norm_row without a GPU: one row of AN_COLS columns
// normalized by a block of AN_THREADS threads (the product launches' blocks: any whole number of
// warps) against Norm.cu's add_rms_norm as NormRowLaunch configures it for that row (warp rows up
// to 512 columns, else a block of 256), on the host emulation: sum and y equal bit for bit, with
// the sum written over the product (in place, as the product launches do). With MEMRA_Q8X_OFF and
// MEMRA_Q8X_ELEMS (= AN_COLS) both also write y's q8 companion (kernels/cuda/Q8Companion.h) after
// the row: equal byte for byte to each other and to gemv_q_quantize_x's layout of y
// (Q8xReference.h), the padding before it and a guard after it untouched. Exit status 1 on any
// difference.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#include "tests/cuda/emulation/Q8xReference.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/NormParams.h"
#undef __CUDACC__

float emu_half(unsigned short) { return 0.0f; }
void emu_register(const char*, void (*)(const void*)) {}

namespace tail_emu {
#include "kernels/cuda/AddNormTail.cuh"
}
#define NORM_COLS AN_COLS
#define NORM_BLOCK 256
#if AN_COLS <= 512
#define NORM_WARP_ROWS 1
#endif
namespace norm_emu {
#include "kernels/cuda/Norm.cu"
}

namespace {
struct TailArgs {
  float *p, *b, *w, *y;
  float eps;
};
}  // namespace

int main() {
#ifdef MEMRA_Q8X_OFF
  static_assert(MEMRA_Q8X_ELEMS == AN_COLS, "the companion of the one row");
  constexpr size_t kOff = MEMRA_Q8X_OFF, kQ8 = EmuQ8xBytes(AN_COLS);
#else
  constexpr size_t kOff = AN_COLS * 4, kQ8 = 0;
#endif
  constexpr size_t kGuard = 256, kBytes = kOff + kQ8 + kGuard;
  std::mt19937 rng(31);
  std::normal_distribution<float> G(0.0f, 1.0f);
  int fail = 0;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<float> p(AN_COLS), b(AN_COLS), w(AN_COLS);
    for (int c = 0; c < AN_COLS; ++c) p[c] = G(rng), b[c] = 3.0f * G(rng), w[c] = 1.0f + 0.1f * G(rng);
    // A group of zeros (its scale 0) when the row has two.
    for (int c = 32; c < 64 && AN_COLS >= 64; ++c) p[c] = 0.0f, b[c] = 0.0f;
    // The outputs (the row, then the companion if any, then a guard) poisoned with 0xff bytes.
    std::vector<unsigned char> yb(kBytes, 0xff), y2b(kBytes, 0xff);
    float* y = reinterpret_cast<float*>(yb.data());
    float* y2 = reinterpret_cast<float*>(y2b.data());
    // The tail: the sum over the product, in place.
    std::vector<float> sum = p;
    TailArgs t{sum.data(), b.data(), w.data(), y, 1e-6f};
    emu_launch(
        [](const void* a) {
          const TailArgs& t = *static_cast<const TailArgs*>(a);
          tail_emu::add_rms_norm_row<AN_COLS, AN_THREADS>(t.p, t.b, t.w, t.p, t.y, t.eps);
        },
        1, AN_THREADS, &t);
    // Norm.cu's add_rms_norm(p, b).
    std::vector<float> sum2(AN_COLS, std::nanf(""));
    NormParams n{};
    n.x = p.data();
    n.z = b.data();
    n.w = w.data();
    n.sum = sum2.data();
    n.y = y2;
    n.n_rows = 1;
    n.eps = 1e-6f;
    emu_launch([](const void* a) { norm_emu::add_rms_norm(*static_cast<const NormParams*>(a)); }, 1, NORM_BLOCK, &n);
    const bool same = std::memcmp(sum.data(), sum2.data(), AN_COLS * 4) == 0 && yb == y2b;
    // The companion against the layout gemv_q_quantize_x writes for y; the rest still poison.
    std::vector<unsigned char> want(kBytes, 0xff);
    std::memcpy(want.data(), y, AN_COLS * 4);
    if (kQ8 > 0) EmuQ8xReference(y, AN_COLS, AN_COLS, want.data() + kOff);
    const bool layout = yb == want;
    std::printf("add_rms_norm_row cols %d threads %d trial %d: sum, y%s %s Norm.cu's add_rms_norm%s\n", AN_COLS,
                AN_THREADS, trial, kQ8 > 0 ? " and its q8 companion" : "", same ? "equal to" : "DIFFER from",
                layout ? "" : "; the output DIFFERS from the row and gemv_q_quantize_x's layout of it");
    if (!same || !layout) fail = 1;
  }
  return fail;
}
