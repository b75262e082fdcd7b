// kernels/cuda/AddNormTail.cuh's add_rms_norm_row without a GPU: one row of AN_COLS columns
// normalized by a block of AN_THREADS threads (the product launches' blocks: any whole number of
// warps) against Norm.cu's add_rms_norm as NormRowLaunch configures it for that row (warp rows up
// to 512 columns, else a block of 256), on the host emulation: sum and y equal bit for bit, with
// the sum written over the product (in place, as the product launches do). Exit status 1 on any
// difference.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
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
  std::mt19937 rng(31);
  std::normal_distribution<float> G(0.0f, 1.0f);
  int fail = 0;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<float> p(AN_COLS), b(AN_COLS), w(AN_COLS);
    for (int c = 0; c < AN_COLS; ++c) p[c] = G(rng), b[c] = 3.0f * G(rng), w[c] = 1.0f + 0.1f * G(rng);
    // The tail: the sum over the product, in place.
    std::vector<float> sum = p, y(AN_COLS, std::nanf(""));
    TailArgs t{sum.data(), b.data(), w.data(), y.data(), 1e-6f};
    emu_launch(
        [](const void* a) {
          const TailArgs& t = *static_cast<const TailArgs*>(a);
          tail_emu::add_rms_norm_row<AN_COLS, AN_THREADS>(t.p, t.b, t.w, t.p, t.y, t.eps);
        },
        1, AN_THREADS, &t);
    // Norm.cu's add_rms_norm(p, b).
    std::vector<float> sum2(AN_COLS, std::nanf("")), y2(AN_COLS, std::nanf(""));
    NormParams n{};
    n.x = p.data();
    n.z = b.data();
    n.w = w.data();
    n.sum = sum2.data();
    n.y = y2.data();
    n.n_rows = 1;
    n.eps = 1e-6f;
    emu_launch([](const void* a) { norm_emu::add_rms_norm(*static_cast<const NormParams*>(a)); }, 1, NORM_BLOCK, &n);
    const bool same =
        std::memcmp(sum.data(), sum2.data(), AN_COLS * 4) == 0 && std::memcmp(y.data(), y2.data(), AN_COLS * 4) == 0;
    std::printf("add_rms_norm_row cols %d threads %d trial %d: sum and y %s Norm.cu's add_rms_norm\n", AN_COLS,
                AN_THREADS, trial, same ? "equal to" : "DIFFER from");
    if (!same) fail = 1;
  }
  return fail;
}
