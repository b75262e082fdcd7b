// kernels/cuda/MoeGemm.cu, the prefill expert products of a MoE FFN (issue 14).
//
// Host side (no GPU): the fragment maps of MoeGemmTile.cuh, run through a C++ statement of
// ldmatrix.x4 and mma.sync.m16n8k16 semantics (PTX ISA), reproduce a naive product of one block
// tile (and the swiglu pairing of gate and up rows); the launches, the scratch layout and what is
// refused.
//
// On the GPU: moe_sort against a host counting sort (ids with empty experts, one hot expert and
// ids outside [0, E)), then moe_gemm over every storage it reads at the tiny fixture's shapes,
// the 35B-A3B expert shapes at T = 64 and 512 (gate/up as one swiglu launch on the fused [E, 2F,
// K] tensor and as two tensors, down plain), and the identity grouping (the shared expert),
// against an f64 reference of exactly the kernel's inputs: weights = formats::Quantize of random
// values, dequantized with kernels/formats (exact) and rounded to bf16 like the activations.
// Outputs are NaN-poisoned, with a poisoned guard after them: a slot's element left unwritten,
// or any write to a skipped slot or past the end, fails. The 35B shapes also print a timing line
// (T = 64, 512 and 4096; information, never asserted).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/KernelCompiler.h"
#include "gtest/gtest.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/MoeGemm.h"
#include "kernels/cuda/MoeGemmParams.h"
#include "kernels/cuda/Target.h"
#include "kernels/formats/Quant.h"
#include "runtime/cuda/CudaDevice.h"
#include "tests/TestUtil.h"
#include "tests/cuda/CudaTestUtil.h"

#define MEMRA_MG_HOST
#include "kernels/cuda/MoeGemmTile.cuh"

namespace memra::kernels::cuda {
namespace {

using ir::DType;

// ---- host: the fragment maps ----

// One block tile (MG_BM x MG_BN, one MG_BK step) through the kernel's loops with ldmatrix and
// mma emulated by their PTX definitions; integer values, so every sum is exact.
TEST(MoeGemmFragments, BlockTileMatchesNaiveProduct) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> v(-4, 4);
  static float As[MG_BM][MG_BKP], Ws[MG_BN][MG_BKP];
  for (auto& r : As)
    for (float& x : r) x = static_cast<float>(v(rng));
  for (auto& r : Ws)
    for (float& x : r) x = static_cast<float>(v(rng));
  // ldmatrix.x4: lane i gives the address of row i % 8 of matrix i / 8 (8 consecutive 16-bit
  // elements); lane l receives, of matrix q, elements 2 (l % 4), 2 (l % 4) + 1 of row l / 4.
  auto ldmatrix = [](auto& tile, auto row_of, auto k_of, int row0, int k0, int q, int l, float out[2]) {
    const int src = 8 * q + l / 4;
    for (int h = 0; h < 2; ++h) out[h] = tile[row0 + row_of(src)][k0 + k_of(src) + 2 * (l % 4) + h];
  };
  float acc[8][32][2][4][4] = {};
  for (int warp = 0; warp < 8; ++warp) {
    const int wm = warp >> 2, wn = warp & 3;
    for (int kk = 0; kk < MG_BK; kk += 16) {
      // af[l][i][reg][half], bf[l][jp][reg][half] as the kernel's registers.
      float af[32][2][4][2], bf[32][2][4][2];
      for (int l = 0; l < 32; ++l)
        for (int q = 0; q < 4; ++q) {
          for (int i = 0; i < 2; ++i) ldmatrix(As, mg_ldm_a_row, mg_ldm_a_k, wm * 32 + i * 16, kk, q, l, af[l][i][q]);
          for (int jp = 0; jp < 2; ++jp)
            ldmatrix(Ws, mg_ldm_b_row, mg_ldm_b_k, wn * 32 + jp * 16, kk, q, l, bf[l][jp][q]);
        }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) {
          // m16n8k16 (PTX ISA "Matrix Fragments for mma.m16n8k16"), g = l / 4, t = l % 4:
          // a0 (g, 2t..), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..);
          // b0 (k 2t.., n g), b1 (k 2t + 8.., n g); c0, c1 (g, 2t / 2t + 1), c2, c3 (g + 8, ..).
          float A[16][16], B[16][8];
          for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            for (int h = 0; h < 2; ++h) {
              A[g][2 * t + h] = af[l][i][0][h];
              A[g + 8][2 * t + h] = af[l][i][1][h];
              A[g][2 * t + 8 + h] = af[l][i][2][h];
              A[g + 8][2 * t + 8 + h] = af[l][i][3][h];
              B[2 * t + h][g] = bf[l][j >> 1][(j & 1) * 2][h];
              B[2 * t + 8 + h][g] = bf[l][j >> 1][(j & 1) * 2 + 1][h];
            }
          }
          for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            for (int q = 0; q < 4; ++q) {
              const int m = g + (q >> 1) * 8, n = 2 * t + (q & 1);
              float s = 0;
              for (int k = 0; k < 16; ++k) s += A[m][k] * B[k][n];
              acc[warp][l][i][j][q] += s;
            }
          }
        }
    }
  }
  // The epilogue's maps against the naive product; every (row, W row) exactly once.
  std::set<std::pair<int, int>> seen;
  for (int warp = 0; warp < 8; ++warp)
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j)
          for (int q = 0; q < 4; ++q) {
            const int wm = warp >> 2, wn = warp & 3;
            const int r = wm * 32 + i * 16 + mg_acc_row(l, q), c = wn * 32 + j * 8 + mg_acc_col(l, q);
            float want = 0;
            for (int k = 0; k < MG_BK; ++k) want += As[r][k] * Ws[c][k];
            ASSERT_EQ(acc[warp][l][i][j][q], want) << "warp " << warp << " lane " << l << " i " << i << " j " << j;
            EXPECT_TRUE(seen.insert({r, c}).second);
          }
  EXPECT_EQ(seen.size(), static_cast<size_t>(MG_BM * MG_BN));
}

// Swiglu: the gate accumulator of n8 tile j (< 2) and the up one of tile j + 2 of a lane are the
// same output column, the one the epilogue writes; the W tile covers each column's gate and up once.
TEST(MoeGemmFragments, SwigluPairsGateAndUpInRegisters) {
  std::set<std::pair<int, int>> rows;  // (column, is_up)
  for (int r = 0; r < MG_BN; ++r) {
    EXPECT_LT(mg_w_col(r, 1, MG_BN), mg_cols_per_block(1, MG_BN));
    EXPECT_TRUE(rows.insert({mg_w_col(r, 1, MG_BN), mg_w_is_up(r, 1, MG_BN)}).second) << r;
    EXPECT_EQ(mg_w_col(r, 0, MG_BN), r);
    EXPECT_EQ(mg_w_is_up(r, 0, MG_BN), 0);
  }
  EXPECT_EQ(rows.size(), static_cast<size_t>(MG_BN));
  for (int wn = 0; wn < 4; ++wn)
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < 2; ++j)
        for (int q = 0; q < 4; ++q) {
          const int gate_row = wn * 32 + j * 8 + mg_acc_col(l, q), up_row = gate_row + 16;
          const int out = wn * 16 + j * 8 + mg_acc_col(l, q);  // the epilogue's column
          EXPECT_EQ(mg_w_col(gate_row, 1, MG_BN), out);
          EXPECT_EQ(mg_w_col(up_row, 1, MG_BN), out);
          EXPECT_EQ(mg_w_is_up(gate_row, 1, MG_BN), 0);
          EXPECT_EQ(mg_w_is_up(up_row, 1, MG_BN), 1);
        }
}

// ---- host: launches and layout ----

TEST(MoeGemmHost, ReadsLaunchesAndLayout) {
  const Target t = *TargetPreset("sm_90");
  for (DType d : GpuBlockFormats()) EXPECT_TRUE(MoeGemmReads(d)) << ir::DTypeName(d);
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) EXPECT_TRUE(MoeGemmReads(d));
  EXPECT_FALSE(MoeGemmReads(DType::kNVFP4));
  EXPECT_FALSE(MoeGemmReads(DType::kI32));

  auto l = MoeGemmLaunch(t, DType::kQ4_K, 2048, 512, 256, 32768, true, true);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->kernel.ToString(), "MoeGemm.cu<MG_BN=64,MG_CK=256,MG_CW=16,MG_ST=4,MG_SWIGLU=1,MG_TYPE=12>::moe_gemm");
  EXPECT_EQ(l->block, 256u);
  EXPECT_EQ(l->grid, (32768u / 64 + 256) * (512 / 32));  // 256-element blocks: 64 weight rows per block
  auto d = MoeGemmLaunch(t, DType::kQ6_K, 512, 2048, 256, 77, false, true);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->grid, (2u + 77) * 32);  // ceil(77 / 64) + min(E, 77) m-tiles
  auto id = MoeGemmLaunch(t, DType::kBF16, 256, 200, 1, 77, false, false);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->grid, 2u * 2);
  EXPECT_EQ(MoeGemmLaunch(t, DType::kQ8_0, 256, 1, 1, 0, false, true)->grid, 1u);  // never an empty grid

  EXPECT_FALSE(MoeGemmLaunch(t, DType::kNVFP4, 256, 64, 8, 64, false, true).ok());
  EXPECT_FALSE(MoeGemmLaunch(t, DType::kQ4_K, 384, 64, 8, 64, false, true).ok());  // K % 256
  EXPECT_FALSE(MoeGemmLaunch(t, DType::kF16, 48, 64, 8, 64, false, true).ok());    // K % 32
  EXPECT_FALSE(MoeGemmLaunch(t, DType::kQ8_0, 256, 0, 8, 64, false, true).ok());
  EXPECT_FALSE(MoeGemmLaunch(t, DType::kQ8_0, 256, 64, 2000, 64, false, true).ok());
  EXPECT_TRUE(MoeGemmLaunch(t, DType::kQ8_0, 256, 64, 2000, 64, false, false).ok());  // E unused

  auto s = MoeSortLaunch(t, 256, 32768);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kernel.ToString(), "MoeGemm.cu<MS_E=256,MS_WARPS=32>::moe_sort");
  EXPECT_EQ(s->grid, 1u);
  EXPECT_EQ(s->block, 1024u);
  EXPECT_EQ(MoeSortLaunch(t, 1024, 10)->block, 256u);
  EXPECT_FALSE(MoeSortLaunch(t, 0, 10).ok());
  EXPECT_FALSE(MoeSortLaunch(t, 1025, 10).ok());

  const MoeSortScratchLayout lay = MoeSortLayout(256, 32768);
  EXPECT_EQ(lay.offsets, 16);
  EXPECT_EQ(lay.tiles, 16 + 1040);
  EXPECT_EQ(lay.order, lay.tiles + (512 + 256) * 16);
  EXPECT_EQ(lay.bytes, (lay.order + 32768 * 4 + 255) / 256 * 256);
  EXPECT_EQ(MoeSortScratchBytes(256, 32768), lay.bytes);
  for (int64_t e : {1, 7, 256})
    for (int64_t n : {0, 1, 63, 64, 65, 1000}) {
      const MoeSortScratchLayout x = MoeSortLayout(e, n);
      EXPECT_EQ(x.tiles % 16, 0);
      EXPECT_EQ(x.order % 16, 0);
      EXPECT_GE(x.bytes, x.order + n * 4);
    }

  // The bound on m-tiles holds for the worst assignments (one slot per expert, all in one).
  EXPECT_GE(MoeGemmMaxTiles(256, 300), 256 + (300 - 256 + 63) / 64);
  EXPECT_GE(MoeGemmMaxTiles(8, 64 * 8 + 8), 8 * 2);
}

// ---- GPU ----

using runtime::cuda::CudaDevice;
using runtime::cuda::CUevent;
using runtime::cuda::DeviceBuffer;
using runtime::cuda::LoadedModule;

constexpr uint32_t kPoison = 0x7fc00000u;  // a NaN
constexpr int64_t kGuard = 256;            // poisoned floats after y

float Bf16Round(float x) { return formats::Bf16ToFloat(formats::FloatToBf16(x)); }

// Runs f(i) for i < n on all cores.
template <typename F>
void ParallelFor(int64_t n, F f) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      for (int64_t i = w; i < n; i += threads) f(i);
    });
  for (auto& t : pool) t.join();
}

// Expert ids of T tokens x k choices: k distinct experts per token; experts with id % 5 == 3 get
// no slot, expert 1 is chosen by about half the tokens.
std::vector<int> MakeIds(int64_t T, int64_t k, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> allowed;
  for (int e = 0; e < E; ++e)
    if (e % 5 != 3) allowed.push_back(e);
  std::vector<int> ids;
  for (int64_t t = 0; t < T; ++t) {
    std::set<int> chosen;
    if (E > 1 && rng() % 2 == 0) chosen.insert(1);
    while (static_cast<int64_t>(chosen.size()) < std::min<int64_t>(k, allowed.size()))
      chosen.insert(allowed[rng() % allowed.size()]);
    std::vector<int> v(chosen.begin(), chosen.end());
    std::shuffle(v.begin(), v.end(), rng);
    ids.insert(ids.end(), v.begin(), v.end());
  }
  return ids;
}

// A stack of E expert matrices [E, rows, K] in `dtype` on the device; distinct random matrices
// for the first `pool` experts, then repeated (expert e holds matrix e % pool: the 35B stacks
// would take minutes to quantize on the host otherwise). deq: the pool dequantized and rounded
// to bf16, [pool, rows, K].
struct ExpertStack {
  DType dtype;
  int64_t E = 0, rows = 0, K = 0, pool = 0, row_bytes = 0;
  DeviceBuffer buf;
  std::vector<float> deq;
  const float* Row(int64_t e, int64_t r) const { return deq.data() + ((e % pool) * rows + r) * K; }
};

absl::StatusOr<ExpertStack> MakeStack(const CudaDevice& dev, DType dtype, int64_t E, int64_t rows, int64_t K,
                                      int64_t pool, uint32_t seed) {
  ExpertStack s;
  s.dtype = dtype;
  s.E = E, s.rows = rows, s.K = K, s.pool = std::min(pool, E);
  s.row_bytes = *ir::StorageBytes(dtype, K);
  const int64_t expert_bytes = rows * s.row_bytes;
  std::vector<uint8_t> bytes(static_cast<size_t>(s.pool * expert_bytes));
  s.deq.resize(static_cast<size_t>(s.pool * rows * K));
  std::vector<std::string> errors(static_cast<size_t>(s.pool * rows));
  ParallelFor(s.pool * rows, [&](int64_t r) {
    std::vector<float> v = testing::RandomNormal(static_cast<size_t>(K), seed * 7919u + r, 0.5f);
    uint8_t* b = bytes.data() + r * s.row_bytes;
    float* d = s.deq.data() + r * K;
    if (dtype == DType::kF32) {
      std::memcpy(b, v.data(), K * 4);
      std::memcpy(d, v.data(), K * 4);
    } else if (dtype == DType::kF16 || dtype == DType::kBF16) {
      for (int64_t k = 0; k < K; ++k) {
        uint16_t h = 0;
        if (dtype == DType::kF16) {
          h = formats::FloatToHalf(v[k]);
          d[k] = formats::HalfToFloat(h);
        } else {
          h = formats::FloatToBf16(v[k]);
          d[k] = formats::Bf16ToFloat(h);
        }
        std::memcpy(b + 2 * k, &h, 2);
      }
    } else {
      const auto gt = static_cast<formats::GgmlType>(ir::InfoOf(dtype).ggml_id);
      absl::Status st = formats::Quantize(gt, absl::MakeConstSpan(v), absl::MakeSpan(b, s.row_bytes));
      if (st.ok()) st = formats::Dequantize(gt, absl::MakeConstSpan(b, s.row_bytes), absl::MakeSpan(d, K));
      if (!st.ok()) errors[r] = std::string(st.message());
    }
    for (int64_t k = 0; k < K; ++k) d[k] = Bf16Round(d[k]);
  });
  for (const std::string& e : errors)
    if (!e.empty()) return absl::InternalError(e);
  auto buf = dev.Alloc(static_cast<size_t>(E * expert_bytes), "experts");
  if (!buf.ok()) return buf.status();
  for (int64_t e = 0; e < E; e += s.pool) {
    const int64_t n = std::min(s.pool, E - e);
    MEMRA_RETURN_IF_ERROR(dev.Upload(buf->ptr() + e * expert_bytes, bytes.data(), n * expert_bytes));
  }
  s.buf = std::move(*buf);
  return s;
}

// The host counting sort moe_sort must reproduce.
struct HostSort {
  std::vector<int> offsets, order, tiles;  // tiles: 4 ints each
  int bad = 0;
};
HostSort SortOnHost(const std::vector<int>& ids, int64_t E) {
  HostSort h;
  std::vector<std::vector<int>> by(E);
  for (size_t s = 0; s < ids.size(); ++s)
    if (ids[s] >= 0 && ids[s] < E)
      by[ids[s]].push_back(static_cast<int>(s));
    else
      ++h.bad;
  h.offsets.push_back(0);
  for (int64_t e = 0; e < E; ++e) {
    const int off = static_cast<int>(h.order.size());
    for (size_t t = 0; t < by[e].size(); t += 64)
      h.tiles.insert(h.tiles.end(), {static_cast<int>(e), off + static_cast<int>(t),
                                     static_cast<int>(std::min<size_t>(64, by[e].size() - t)), 0});
    h.order.insert(h.order.end(), by[e].begin(), by[e].end());
    h.offsets.push_back(static_cast<int>(h.order.size()));
  }
  return h;
}

class MoeGemmGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    memra::testing::GpuKernelEnv env;
    memra::testing::OpenGpuKernelEnv("memra-moegemm-cache", env);
    skip_ = env.skip;
    dev_ = env.dev;
    compiler_ = env.compiler;
  }
  static void TearDownTestSuite() {
    if (!rows_.empty()) {
      std::printf("\n%-78s %10s %8s  %s\n", "case", "nmse", "bound", "result");
      for (const auto& r : rows_) std::printf("%s\n", r.c_str());
    }
    for (const auto& r : timings_) std::printf("%s\n", r.c_str());
    modules_.clear();
    delete compiler_;
    delete dev_;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << "no GPU: " << skip_;
  }

  static void Precompile(const std::vector<Launch>& launches) {
    std::vector<ModuleSpec> todo;
    std::set<std::string> seen;
    for (const Launch& l : launches)
      if (!modules_.count(l.kernel.module.Key()) && seen.insert(l.kernel.module.Key()).second)
        todo.push_back(l.kernel.module);
    if (todo.empty()) return;
    auto cubins = compiler_->CompileAll(todo);
    ASSERT_TRUE(cubins.ok()) << cubins.status();
    for (size_t i = 0; i < todo.size(); ++i) {
      auto l = LoadedModule::Load(*dev_, *(*cubins)[i], todo[i].Key());
      ASSERT_TRUE(l.ok()) << l.status();
      modules_[todo[i].Key()] = std::move(*l);
    }
  }

  // Issues `work`'s kernel calls (launch i = launches[i]).
  static void Issue(const std::vector<Launch>& launches, const DeviceWork& work) {
    for (const DeviceAction& a : work.actions()) {
      const auto* k = std::get_if<KernelCall>(&a);
      ASSERT_NE(k, nullptr);
      ASSERT_LT(k->launch, launches.size());
      const Launch& l = launches[k->launch];
      auto fn = modules_.at(l.kernel.module.Key())->Function(l.kernel.entry);
      ASSERT_TRUE(fn.ok()) << fn.status();
      void* args[] = {const_cast<unsigned char*>(k->params.bytes.data())};
      ASSERT_EQ(dev_->driver().cuLaunchKernel(*fn, l.grid, 1, 1, l.block, 1, 1, l.smem, dev_->stream(), args, nullptr),
                0)
          << l.kernel.ToString();
    }
  }

  static void Poison(runtime::cuda::CUdeviceptr p, int64_t words) {
    ASSERT_EQ(dev_->driver().cuMemsetD32Async(p, kPoison, static_cast<size_t>(words), dev_->stream()), 0);
  }

  // Mean time of `reps` issues of `work` (after one warm-up), in ms.
  static double Time(const std::vector<Launch>& launches, const DeviceWork& work, int reps) {
    const auto& d = dev_->driver();
    Issue(launches, work);
    CUevent a = nullptr, b = nullptr;
    EXPECT_EQ(d.cuEventCreate(&a, 0), 0);
    EXPECT_EQ(d.cuEventCreate(&b, 0), 0);
    EXPECT_EQ(d.cuEventRecord(a, dev_->stream()), 0);
    for (int i = 0; i < reps; ++i) Issue(launches, work);
    EXPECT_EQ(d.cuEventRecord(b, dev_->stream()), 0);
    EXPECT_EQ(d.cuEventSynchronize(b), 0);
    float ms = 0;
    EXPECT_EQ(d.cuEventElapsedTime(&ms, a, b), 0);
    d.cuEventDestroy(a);
    d.cuEventDestroy(b);
    return ms / reps;
  }

  struct Product {
    std::string name;
    const ExpertStack* w = nullptr;      // plain: [E, N, K]; swiglu: gate and up (see fused)
    const ExpertStack* up = nullptr;     // swiglu with two tensors; null with fused
    bool swiglu = false, fused = false;  // fused: w is [E, 2N, K], gate rows then up rows
    bool grouped = true;
    int64_t T = 0, k = 1, N = 0, K = 0, E = 1;
    bool a_per_token = true;  // a [T, K] read at slot / k (gate/up); else a [T k, K] (down)
    std::vector<int> ids;     // grouped: T k ids
    int64_t check_every = 1;  // reference for every n-th slot (all are checked for poison)
    bool time = false;
  };

  void Run(const Product& c, uint32_t seed) {
    SCOPED_TRACE(c.name);
    const int64_t n_slots = c.grouped ? static_cast<int64_t>(c.ids.size()) : c.T;
    const int64_t max_slots = n_slots;
    const int64_t a_rows = c.a_per_token ? c.T : n_slots;
    const int64_t a_div = c.a_per_token && c.grouped ? c.k : 1;
    const int64_t N = c.N, K = c.K;

    std::vector<float> a = testing::RandomNormal(static_cast<size_t>(a_rows * K), seed, 1.0f);
    auto ab = dev_->Alloc(a.size() * 4, "a");
    ASSERT_TRUE(ab.ok()) << ab.status();
    ASSERT_TRUE(dev_->Upload(ab->ptr(), a.data(), a.size() * 4).ok());
    DeviceBuffer idb, scratch;
    std::vector<Launch> launches;
    if (c.grouped) {
      auto b = dev_->Alloc(std::max<size_t>(4, c.ids.size() * 4), "ids");
      ASSERT_TRUE(b.ok());
      ASSERT_TRUE(dev_->Upload(b->ptr(), c.ids.data(), c.ids.size() * 4).ok());
      idb = std::move(*b);
      auto s = dev_->Alloc(MoeSortScratchBytes(c.E, max_slots), "scratch");
      ASSERT_TRUE(s.ok());
      scratch = std::move(*s);
      Poison(scratch.ptr(), MoeSortScratchBytes(c.E, max_slots) / 4);
      auto ls = MoeSortLaunch(dev_->target(), c.E, max_slots);
      ASSERT_TRUE(ls.ok()) << ls.status();
      launches.push_back(*ls);
    }
    auto lg = MoeGemmLaunch(dev_->target(), c.w->dtype, K, N, c.E, max_slots, c.swiglu, c.grouped);
    ASSERT_TRUE(lg.ok()) << lg.status();
    launches.push_back(*lg);
    Precompile(launches);
    if (HasFatalFailure()) return;

    auto yb = dev_->Alloc(static_cast<size_t>(n_slots * N + kGuard) * 4, "y");
    ASSERT_TRUE(yb.ok());
    Poison(yb->ptr(), n_slots * N + kGuard);

    DeviceWork work;
    if (c.grouped) BindMoeSort(work, 0, idb.ptr(), n_slots, c.E, max_slots, scratch.ptr());
    MoeGemmArgs g;
    g.a = ab->ptr();
    g.a_row_div = a_div;
    g.row_bytes = c.w->row_bytes;
    g.w0 = c.w->buf.ptr();
    g.expert_bytes = c.w->rows * c.w->row_bytes;
    if (c.swiglu) g.w1 = c.fused ? g.w0 + N * c.w->row_bytes : c.up->buf.ptr();
    g.y = yb->ptr();
    g.n_slots = n_slots;
    g.max_slots = max_slots;
    g.N = N, g.K = K, g.E = c.E;
    g.sort_scratch = c.grouped ? scratch.ptr() : 0;
    BindMoeGemm(work, c.grouped ? 1 : 0, g);
    Issue(launches, work);
    ASSERT_TRUE(dev_->Synchronize("moe_gemm").ok());

    std::vector<uint32_t> y(static_cast<size_t>(n_slots * N + kGuard));
    ASSERT_TRUE(dev_->Download(y.data(), yb->ptr(), y.size() * 4).ok());
    std::vector<float> ar(a.size());
    for (size_t i = 0; i < a.size(); ++i) ar[i] = Bf16Round(a[i]);

    // Which slots are written, and the reference of every check_every-th one.
    std::vector<int64_t> checked;
    int unwritten = 0, overwritten = 0;
    for (int64_t s = 0; s < n_slots; ++s) {
      const int e = c.grouped ? c.ids[s] : 0;
      const bool valid = e >= 0 && e < c.E;
      for (int64_t n = 0; n < N; ++n) {
        const uint32_t b = y[s * N + n];
        float f;
        std::memcpy(&f, &b, 4);
        if (valid)
          unwritten += !std::isfinite(f);
        else
          overwritten += b != kPoison;
      }
      if (valid && s % c.check_every == 0) checked.push_back(s);
    }
    for (int64_t i = 0; i < kGuard; ++i) overwritten += y[n_slots * N + i] != kPoison;
    std::vector<double> num(checked.size()), den(checked.size());
    const ExpertStack* up = c.fused ? c.w : c.up;
    const int64_t up_row0 = c.fused ? N : 0;
    ParallelFor(static_cast<int64_t>(checked.size()), [&](int64_t i) {
      const int64_t s = checked[i];
      const int e = c.grouped ? c.ids[s] : 0;
      const float* x = ar.data() + (s / a_div) * K;
      for (int64_t n = 0; n < N; ++n) {
        auto dot = [&](const float* w) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(x[k]) * w[k];
          return acc;
        };
        double want = dot(c.w->Row(e, n));
        if (c.swiglu) {
          const double u = dot(up->Row(e, up_row0 + n));
          want = want / (1.0 + std::exp(-want)) * u;
        }
        float got;
        std::memcpy(&got, &y[s * N + n], 4);
        if (!std::isfinite(got)) continue;  // counted as unwritten
        num[i] += (got - want) * (got - want);
        den[i] += want * want;
      }
    });
    double tn = 0, td = 0;
    for (size_t i = 0; i < checked.size(); ++i) tn += num[i], td += den[i];
    const double nmse = td > 0 ? tn / td : 0;
    // Inputs are exactly the kernel's (bf16 values; their products are exact in f32): only the
    // f32 accumulation differs from the f64 reference, ~K 2^-24 relative at worst per dot and far
    // less on average (nmse ~1e-12 expected). 1e-8 leaves room for the tensor cores' accumulation
    // (not round-to-nearest everywhere) and still fails any real mapping or rounding error (a
    // weight or activation not rounded to bf16 costs ~1e-6, a wrong element ~1e-2 or more).
    const double bound = 1e-8;
    const bool ok = unwritten == 0 && overwritten == 0 && nmse <= bound && !checked.empty();
    rows_.push_back(absl::StrFormat(
        "%-78s %10.3e %8.1e  %s%s", c.name, nmse, bound, ok ? "ok" : "FAIL",
        unwritten || overwritten ? absl::StrCat("  ", unwritten, " unwritten, ", overwritten, " overwritten") : ""));
    EXPECT_EQ(unwritten, 0) << "elements of valid slots left poisoned (or non-finite)";
    EXPECT_EQ(overwritten, 0) << "writes to skipped slots or past y";
    EXPECT_LE(nmse, bound);
    EXPECT_FALSE(checked.empty());

    if (c.time) {
      // The whole step (sort + gemm), then the gemm alone (its call replayed on the sorted scratch).
      const double ms = Time(launches, work, 10);
      DeviceWork gemm_only;
      BindMoeGemm(gemm_only, c.grouped ? 1 : 0, g);
      const double gemm_ms = Time(launches, gemm_only, 10);
      const double flops = 2.0 * n_slots * N * K * (c.swiglu ? 2 : 1);
      timings_.push_back(absl::StrFormat("  timing %-58s sort+gemm %8.3f ms  gemm %8.3f ms  %7.1f TFLOP/s", c.name, ms,
                                         gemm_ms, flops / (gemm_ms * 1e-3) / 1e12));
    }
  }

  static std::string skip_;
  static CudaDevice* dev_;
  static codegen::KernelCompiler* compiler_;
  static std::map<std::string, std::unique_ptr<LoadedModule>> modules_;
  static std::vector<std::string> rows_, timings_;
};
std::string MoeGemmGpuTest::skip_;
CudaDevice* MoeGemmGpuTest::dev_ = nullptr;
codegen::KernelCompiler* MoeGemmGpuTest::compiler_ = nullptr;
std::map<std::string, std::unique_ptr<LoadedModule>> MoeGemmGpuTest::modules_;
std::vector<std::string> MoeGemmGpuTest::rows_, MoeGemmGpuTest::timings_;

// moe_sort against the host counting sort, byte for byte (the scratch is poisoned first, so an
// entry it should write and does not fails too).
TEST_F(MoeGemmGpuTest, SortMatchesHostCountingSort) {
  struct SortCase {
    int64_t T, k, E;
    bool bad_ids;
  };
  const std::vector<SortCase> cases = {{13, 2, 8, false},     {77, 2, 8, true},      {1, 1, 1, false},
                                       {512, 8, 256, true},   {4096, 8, 256, false}, {100, 4, 1024, true},
                                       {8192, 8, 128, false}, {3000, 8, 512, false}};
  for (const SortCase& sc : cases) {
    SCOPED_TRACE(absl::StrCat("T=", sc.T, " k=", sc.k, " E=", sc.E, sc.bad_ids ? " with bad ids" : ""));
    std::vector<int> ids = MakeIds(sc.T, sc.k, sc.E, static_cast<uint32_t>(sc.T * 31 + sc.E));
    if (sc.bad_ids) {
      ids[0] = -1;
      ids[ids.size() / 2] = static_cast<int>(sc.E);
      ids.back() = 1 << 30;
    }
    const int64_t n = static_cast<int64_t>(ids.size());
    auto ls = MoeSortLaunch(dev_->target(), sc.E, n);
    ASSERT_TRUE(ls.ok()) << ls.status();
    std::vector<Launch> launches = {*ls};
    Precompile(launches);
    if (HasFatalFailure()) return;
    auto idb = dev_->Alloc(ids.size() * 4, "ids");
    ASSERT_TRUE(idb.ok());
    ASSERT_TRUE(dev_->Upload(idb->ptr(), ids.data(), ids.size() * 4).ok());
    const MoeSortScratchLayout lay = MoeSortLayout(sc.E, n);
    auto sb = dev_->Alloc(lay.bytes, "scratch");
    ASSERT_TRUE(sb.ok());
    Poison(sb->ptr(), lay.bytes / 4);
    DeviceWork work;
    BindMoeSort(work, 0, idb->ptr(), n, sc.E, n, sb->ptr());
    Issue(launches, work);
    ASSERT_TRUE(dev_->Synchronize("moe_sort").ok());
    std::vector<int> got(lay.bytes / 4);
    ASSERT_TRUE(dev_->Download(got.data(), sb->ptr(), lay.bytes).ok());
    const HostSort want = SortOnHost(ids, sc.E);
    const int* h = got.data();
    EXPECT_EQ(h[0], static_cast<int>(want.tiles.size() / 4)) << "tile count";
    EXPECT_EQ(h[1], want.bad) << "ids outside [0, E)";
    EXPECT_EQ(h[2], static_cast<int>(want.order.size())) << "valid slots";
    EXPECT_EQ(std::vector<int>(got.begin() + lay.offsets / 4, got.begin() + lay.offsets / 4 + sc.E + 1), want.offsets);
    EXPECT_EQ(std::vector<int>(got.begin() + lay.order / 4, got.begin() + lay.order / 4 + want.order.size()),
              want.order);
    EXPECT_EQ(std::vector<int>(got.begin() + lay.tiles / 4, got.begin() + lay.tiles / 4 + want.tiles.size()),
              want.tiles);
    EXPECT_LE(static_cast<int64_t>(want.tiles.size() / 4), MoeGemmMaxTiles(sc.E, n));
    if (sc.T == 4096 && sc.E == 256) {
      const double ms = Time(launches, work, 20);
      timings_.push_back(absl::StrFormat("  timing moe_sort T=4096 k=8 E=256: %.1f us", ms * 1e3));
    }
  }
}

// Every storage moe_gemm reads at the tiny fixture's shapes (E = 8, k = 2, K = 256): swiglu
// (fused gate_up) at N = 128 and 256, down-like plain at N = 128 and 256, T = 13 and 77, with
// some ids outside [0, E) at T = 77 (their slots must stay untouched).
TEST_F(MoeGemmGpuTest, TinyEveryStorage) {
  std::vector<DType> storages = GpuBlockFormats();
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) storages.push_back(d);
  uint32_t seed = 1;
  for (DType d : storages) {
    for (int64_t N : {128, 256}) {
      auto gu = MakeStack(*dev_, d, 8, 2 * N, 256, 8, seed++);
      ASSERT_TRUE(gu.ok()) << gu.status();
      auto down = MakeStack(*dev_, d, 8, N, 256, 8, seed++);
      ASSERT_TRUE(down.ok()) << down.status();
      for (int64_t T : {13, 77}) {
        std::vector<int> ids = MakeIds(T, 2, 8, seed++);
        if (T == 77) ids[5] = -3, ids[100] = 8;
        Product p;
        p.w = &*gu;
        p.swiglu = p.fused = true;
        p.T = T, p.k = 2, p.N = N, p.K = 256, p.E = 8;
        p.ids = ids;
        p.name = absl::StrCat(ir::DTypeName(d), " tiny swiglu(fused) T=", T, " N=", N, " K=256");
        Run(p, seed++);
        Product q;
        q.w = &*down;
        q.T = T, q.k = 2, q.N = N, q.K = 256, q.E = 8;
        q.a_per_token = false;
        q.ids = ids;
        q.name = absl::StrCat(ir::DTypeName(d), " tiny plain(down) T=", T, " N=", N, " K=256");
        Run(q, seed++);
      }
    }
  }
}

// The identity grouping (the shared expert's dense product): T = 77, K = 256, N = 256 and an N
// that is no multiple of the tile (200).
TEST_F(MoeGemmGpuTest, IdentityGrouping) {
  uint32_t seed = 500;
  for (DType d : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kIQ4_XS, DType::kBF16, DType::kF32}) {
    for (int64_t N : {256, 200}) {
      auto w = MakeStack(*dev_, d, 1, 2 * N, 256, 1, seed++);
      ASSERT_TRUE(w.ok()) << w.status();
      for (bool swiglu : {false, true}) {
        Product p;
        p.w = &*w;
        p.swiglu = p.fused = swiglu;
        p.grouped = false;
        p.T = 77, p.N = N, p.K = 256, p.E = 1;
        p.name = absl::StrCat(ir::DTypeName(d), " identity ", swiglu ? "swiglu" : "plain", " T=77 N=", N, " K=256");
        Run(p, seed++);
      }
    }
  }
}

// The 35B-A3B expert shapes (E = 256, k = 8): gate/up K = 2048, F = 512 (fused, and as two
// tensors), down K = 512, N = 2048; T = 64 and 512 checked (every slot at 64, every 7th at 512),
// T = 4096 timed and sampled. Weights: 13 distinct expert matrices repeated over the 256.
TEST_F(MoeGemmGpuTest, Qwen35MoeShapes) {
  uint32_t seed = 900;
  for (DType d : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kIQ4_XS}) {
    auto gu = MakeStack(*dev_, d, 256, 1024, 2048, 13, seed++);
    ASSERT_TRUE(gu.ok()) << gu.status();
    auto gate = MakeStack(*dev_, d, 256, 512, 2048, 13, seed++);
    ASSERT_TRUE(gate.ok()) << gate.status();
    auto up = MakeStack(*dev_, d, 256, 512, 2048, 11, seed++);
    ASSERT_TRUE(up.ok()) << up.status();
    auto down = MakeStack(*dev_, d, 256, 2048, 512, 13, seed++);
    ASSERT_TRUE(down.ok()) << down.status();
    for (int64_t T : {64, 512, 4096}) {
      const std::vector<int> ids = MakeIds(T, 8, 256, seed++);
      const int64_t every = T == 64 ? 1 : T == 512 ? 7 : 61;
      Product p;
      p.w = &*gu;
      p.swiglu = p.fused = true;
      p.T = T, p.k = 8, p.N = 512, p.K = 2048, p.E = 256;
      p.ids = ids;
      p.check_every = every;
      p.time = true;
      p.name = absl::StrCat(ir::DTypeName(d), " 35B gate_up swiglu(fused) T=", T, " N=512 K=2048");
      Run(p, seed++);
      if (T != 4096) {
        Product s = p;
        s.w = &*gate;
        s.up = &*up;
        s.fused = false;
        s.time = false;
        s.name = absl::StrCat(ir::DTypeName(d), " 35B gate/up swiglu(two tensors) T=", T, " N=512 K=2048");
        Run(s, seed++);
      }
      Product q;
      q.w = &*down;
      q.T = T, q.k = 8, q.N = 2048, q.K = 512, q.E = 256;
      q.a_per_token = false;
      q.ids = ids;
      q.check_every = every;
      q.time = true;
      q.name = absl::StrCat(ir::DTypeName(d), " 35B down plain T=", T, " N=2048 K=512");
      Run(q, seed++);
    }
  }
}

}  // namespace
}  // namespace memra::kernels::cuda
