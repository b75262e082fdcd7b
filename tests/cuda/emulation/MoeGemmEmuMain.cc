// Checks kernels/cuda/MoeGemm.cu without a GPU (moegemm_run.sh): moe_sort and moe_gemm run in the
// host emulation (MoeGemmEmuConfig.cc) through MoeGemm.h's launches and binds, host pointers
// standing in for device addresses; the same checks as tests/cuda/MoeGemm_test (the host counting
// sort byte for byte; outputs NaN-poisoned with a guard, nmse against the f64 reference of the
// bf16-rounded inputs) on small shapes: every storage the emulation has, plain / swiglu (fused and
// two tensors), experts with no slot and with several m-tiles, ragged N, ids outside [0, E), the
// identity grouping, expert parallelism (this rank's E of the router's E * parts: other ranks'
// slots skipped, never written). `--list` prints the module keys the cases launch instead (moegemm_run.sh
// compiles one MoeGemmEmuConfig.cc per key).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/DType.h"
#include "kernels/cuda/MoeGemm.h"
#include "kernels/cuda/Target.h"
#include "kernels/formats/Quant.h"
#include "tests/TestUtil.h"
#include "tests/cuda/emulation/MoeGemmEmu.h"

float emu_half(unsigned short h) { return memra::formats::HalfToFloat(h); }

namespace {

using memra::ir::DType;
namespace kc = memra::kernels::cuda;
namespace formats = memra::formats;

constexpr uint32_t kPoison = 0x7fc00000u;
constexpr int64_t kGuard = 64;

float Bf16Round(float x) { return formats::Bf16ToFloat(formats::FloatToBf16(x)); }

int failures = 0;
#define CHECK(c, ...)                                                                                  \
  do {                                                                                                 \
    if (!(c)) {                                                                                        \
      ++failures;                                                                                      \
      std::printf("  FAIL %s:%d: %s %s\n", __FILE__, __LINE__, #c, absl::StrCat(__VA_ARGS__).c_str()); \
    }                                                                                                  \
  } while (0)

uint64_t Addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

bool listing = false;  // --list
// --list: prints the launches' module keys; the case then stops there.
bool Listed(const std::vector<kc::Launch>& launches) {
  if (listing)
    for (const kc::Launch& l : launches) std::printf("%s\n", l.kernel.module.Key().c_str());
  return listing;
}

void Issue(const std::vector<kc::Launch>& launches, const kc::DeviceWork& work) {
  for (const kc::DeviceAction& a : work.actions()) {
    const auto& k = std::get<kc::KernelCall>(a);
    const kc::Launch& l = launches.at(k.launch);
    const std::string key = l.kernel.ToString();
    if (MgEmuFind(key) == nullptr) {
      std::printf("  no emulated module %s\n", key.c_str());
      ++failures;
      return;
    }
    MgEmuLaunch(key, l.grid, l.block, k.params.bytes.data());
  }
}

std::vector<int> MakeIds(int64_t T, int64_t k, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids;
  for (int64_t t = 0; t < T; ++t) {
    std::set<int> chosen;
    if (E > 1 && rng() % 2 == 0) chosen.insert(1);
    while (static_cast<int64_t>(chosen.size()) < std::min<int64_t>(k, E - (E > 4 ? E / 5 : 0))) {
      const int e = static_cast<int>(rng() % E);
      if (E > 4 && e % 5 == 3) continue;  // experts with no slot
      chosen.insert(e);
    }
    std::vector<int> v(chosen.begin(), chosen.end());
    std::shuffle(v.begin(), v.end(), rng);
    ids.insert(ids.end(), v.begin(), v.end());
  }
  return ids;
}

struct Stack {
  DType dtype;
  int64_t E, rows, K, row_bytes;
  std::vector<uint8_t> bytes;  // 16-byte aligned start (vector of uint8_t from new[] is)
  std::vector<float> deq;      // bf16-rounded
  const float* Row(int64_t e, int64_t r) const { return deq.data() + (e * rows + r) * K; }
};

Stack MakeStack(DType d, int64_t E, int64_t rows, int64_t K, uint32_t seed) {
  Stack s{d, E, rows, K, *memra::ir::StorageBytes(d, K), {}, {}};
  s.bytes.resize(static_cast<size_t>(E * rows * s.row_bytes + 16));
  s.deq.resize(static_cast<size_t>(E * rows * K));
  for (int64_t r = 0; r < E * rows; ++r) {
    std::vector<float> v = memra::testing::RandomNormal(static_cast<size_t>(K), seed * 7919u + r, 0.5f);
    uint8_t* b = s.bytes.data() + r * s.row_bytes;
    float* o = s.deq.data() + r * K;
    if (d == DType::kF32) {
      std::memcpy(b, v.data(), K * 4);
      std::memcpy(o, v.data(), K * 4);
    } else if (d == DType::kF16 || d == DType::kBF16) {
      for (int64_t k = 0; k < K; ++k) {
        const uint16_t h = d == DType::kF16 ? formats::FloatToHalf(v[k]) : formats::FloatToBf16(v[k]);
        o[k] = d == DType::kF16 ? formats::HalfToFloat(h) : formats::Bf16ToFloat(h);
        std::memcpy(b + 2 * k, &h, 2);
      }
    } else {
      const auto gt = static_cast<formats::GgmlType>(memra::ir::InfoOf(d).ggml_id);
      CHECK(formats::Quantize(gt, absl::MakeConstSpan(v), absl::MakeSpan(b, s.row_bytes)).ok());
      CHECK(formats::Dequantize(gt, absl::MakeConstSpan(b, s.row_bytes), absl::MakeSpan(o, K)).ok());
    }
    for (int64_t k = 0; k < K; ++k) o[k] = Bf16Round(o[k]);
  }
  return s;
}

// first > 0 or parts > 1: expert parallelism, ids over the router's E * parts experts, this rank's
// [first, first + E).
void SortCase(int64_t T, int64_t k, int64_t E, bool bad, int64_t first = 0, int64_t parts = 1) {
  const kc::Target t = *kc::TargetPreset("sm_90");
  std::vector<int> ids = MakeIds(T, k, E * parts, static_cast<uint32_t>(T + E));
  if (bad) ids[0] = -1, ids[ids.size() / 2] = static_cast<int>(E * parts), ids.back() = 1 << 30;
  const int64_t n = static_cast<int64_t>(ids.size());
  const kc::MoeSortScratchLayout lay = kc::MoeSortLayout(E, n);
  std::vector<uint32_t> scratch(lay.bytes / 4, kPoison);
  std::vector<kc::Launch> launches = {*kc::MoeSortLaunch(t, E, n)};
  if (Listed(launches)) return;
  kc::DeviceWork work;
  kc::BindMoeSort(work, 0, Addr(ids.data()), n, E, n, Addr(scratch.data()), first);
  Issue(launches, work);
  const int* h = reinterpret_cast<const int*>(scratch.data());
  std::vector<std::vector<int>> by(E);
  int n_bad = 0;  // skipped: another rank's expert or an invalid id
  for (int64_t s = 0; s < n; ++s)
    if (ids[s] - first >= 0 && ids[s] - first < E)
      by[ids[s] - first].push_back(static_cast<int>(s));
    else
      ++n_bad;
  std::vector<int> order, offsets = {0}, tiles;
  for (int64_t e = 0; e < E; ++e) {
    for (size_t i = 0; i < by[e].size(); i += 64)
      tiles.insert(tiles.end(), {static_cast<int>(e), static_cast<int>(order.size() + i),
                                 static_cast<int>(std::min<size_t>(64, by[e].size() - i)), 0});
    order.insert(order.end(), by[e].begin(), by[e].end());
    offsets.push_back(static_cast<int>(order.size()));
  }
  const std::string name =
      absl::StrCat("moe_sort T=", T, " k=", k, " E=", E, bad ? " bad ids" : "",
                   parts > 1 ? absl::StrCat(" experts [", first, ", ", first + E, ") of ", E * parts) : std::string());
  const int before = failures;
  CHECK(h[0] == static_cast<int>(tiles.size() / 4), name, " tiles ", h[0]);
  CHECK(h[1] == n_bad, name, " bad ", h[1]);
  CHECK(h[2] == static_cast<int>(order.size()), name, " valid ", h[2]);
  CHECK(std::equal(offsets.begin(), offsets.end(), h + lay.offsets / 4), name, " offsets");
  CHECK(std::equal(order.begin(), order.end(), h + lay.order / 4), name, " order");
  CHECK(std::equal(tiles.begin(), tiles.end(), h + lay.tiles / 4), name, " tiles");
  std::printf("%-70s %s\n", name.c_str(), failures == before ? "ok" : "FAIL");
}

struct Gemm {
  std::string name;
  DType d;
  bool swiglu = false, fused = false, grouped = true, a_per_token = true;
  int64_t T, k = 1, N, K = 256, E = 1;
  bool bad = false;
  int64_t first = 0, parts = 1;  // expert parallelism: this rank's [first, first + E) of E * parts
};

void GemmCase(const Gemm& c, uint32_t seed) {
  const kc::Target t = *kc::TargetPreset("sm_90");
  std::vector<int> ids;
  if (c.grouped) {
    ids = MakeIds(c.T, c.k, c.E * c.parts, seed);
    if (c.bad) ids[3] = -7, ids[ids.size() - 2] = static_cast<int>(c.E * c.parts);
  }
  const int64_t n_slots = c.grouped ? static_cast<int64_t>(ids.size()) : c.T;
  const int64_t a_rows = c.a_per_token ? c.T : n_slots;
  const int64_t a_div = c.a_per_token && c.grouped ? c.k : 1;
  const int64_t N = c.N, K = c.K;
  const Stack w = MakeStack(c.d, c.E, c.swiglu && c.fused ? 2 * N : N, K, seed * 3);
  const Stack up = c.swiglu && !c.fused ? MakeStack(c.d, c.E, N, K, seed * 5) : Stack{c.d, 0, 0, 0, 0, {}, {}};
  std::vector<float> a = memra::testing::RandomNormal(static_cast<size_t>(a_rows * K), seed, 1.0f);
  std::vector<uint32_t> scratch(kc::MoeSortScratchBytes(c.E, n_slots) / 4, kPoison);
  std::vector<uint32_t> y(static_cast<size_t>(n_slots * N + kGuard), kPoison);

  std::vector<kc::Launch> launches;
  kc::DeviceWork work;
  if (c.grouped) {
    launches.push_back(*kc::MoeSortLaunch(t, c.E, n_slots));
    kc::BindMoeSort(work, 0, Addr(ids.data()), n_slots, c.E, n_slots, Addr(scratch.data()), c.first);
  }
  auto lg = kc::MoeGemmLaunch(t, c.d, K, N, c.E, n_slots, c.swiglu, c.grouped);
  CHECK(lg.ok(), lg.status().ToString());
  if (!lg.ok()) return;
  launches.push_back(*lg);
  if (Listed(launches)) return;
  kc::MoeGemmArgs g;
  g.a = Addr(a.data());
  g.a_row_div = a_div;
  g.w0 = Addr(w.bytes.data());
  g.row_bytes = w.row_bytes;
  g.expert_bytes = w.rows * w.row_bytes;
  if (c.swiglu) g.w1 = c.fused ? g.w0 + N * w.row_bytes : Addr(up.bytes.data());
  g.y = Addr(y.data());
  g.n_slots = n_slots;
  g.max_slots = n_slots;
  g.N = N, g.K = K, g.E = c.E;
  g.sort_scratch = c.grouped ? Addr(scratch.data()) : 0;
  kc::BindMoeGemm(work, c.grouped ? 1 : 0, g);
  Issue(launches, work);

  int unwritten = 0, overwritten = 0;
  double num = 0, den = 0;
  for (int64_t s = 0; s < n_slots; ++s) {
    const int e = c.grouped ? ids[s] - static_cast<int>(c.first) : 0;
    const bool valid = e >= 0 && e < c.E;  // else another rank's expert or an invalid id: never written
    std::vector<float> x(K);
    for (int64_t kk = 0; kk < K; ++kk) x[kk] = Bf16Round(a[(s / a_div) * K + kk]);
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t b = y[s * N + n];
      float got;
      std::memcpy(&got, &b, 4);
      if (!valid) {
        overwritten += b != kPoison;
        continue;
      }
      if (!std::isfinite(got)) {
        ++unwritten;
        continue;
      }
      auto dot = [&](const float* r) {
        double acc = 0;
        for (int64_t kk = 0; kk < K; ++kk) acc += static_cast<double>(x[kk]) * r[kk];
        return acc;
      };
      double want = dot(w.Row(e, n));
      if (c.swiglu) {
        const double u = c.fused ? dot(w.Row(e, N + n)) : dot(up.Row(e, n));
        want = want / (1.0 + std::exp(-want)) * u;
      }
      num += (got - want) * (got - want);
      den += want * want;
    }
  }
  for (int64_t i = 0; i < kGuard; ++i) overwritten += y[n_slots * N + i] != kPoison;
  const double nmse = den > 0 ? num / den : 1;
  const bool ok = unwritten == 0 && overwritten == 0 && nmse <= 1e-8;
  failures += !ok;
  std::printf("%-70s nmse %.3e  %s%s\n", c.name.c_str(), nmse, ok ? "ok" : "FAIL",
              unwritten || overwritten
                  ? absl::StrCat("  ", unwritten, " unwritten, ", overwritten, " overwritten").c_str()
                  : "");
}

}  // namespace

int main(int argc, char** argv) {
  listing = argc > 1 && std::string(argv[1]) == "--list";
  const std::string only = argc > 1 && !listing ? argv[1] : "";
  auto want = [&](const std::string& name) { return only.empty() || name.find(only) != std::string::npos; };
  if (want("moe_sort")) {
    SortCase(77, 2, 8, true);
    SortCase(13, 2, 8, false);
    SortCase(1, 1, 8, false);
    SortCase(64, 8, 256, true);
    SortCase(300, 8, 256, false);
    // Expert parallelism: rank 1 of 2 and rank 2 of 4 (with invalid ids beside the other ranks').
    SortCase(77, 2, 8, false, 8, 2);
    SortCase(64, 8, 64, true, 128, 4);
  }
  std::vector<Gemm> cases;
  auto add = [&](Gemm g) {
    g.name = absl::StrCat(
        memra::ir::DTypeName(g.d), g.grouped ? "" : " identity",
        g.swiglu ? (g.fused ? " swiglu(fused)" : " swiglu(two)") : " plain", " T=", g.T, " k=", g.k, " E=", g.E,
        " N=", g.N, " K=", g.K, g.bad ? " bad ids" : "",
        g.parts > 1 ? absl::StrCat(" experts [", g.first, ", ", g.first + g.E, ") of ", g.E * g.parts) : std::string());
    cases.push_back(g);
  };
  // The main formats, both forms; an expert with > 64 slots (E = 4, T = 150, k = 2: ~75 each).
  add({"", DType::kQ8_0, true, true, true, true, 13, 2, 128, 256, 8});
  add({"", DType::kQ8_0, false, false, true, false, 150, 2, 128, 256, 4});
  add({"", DType::kQ4_K, true, false, true, true, 77, 2, 64, 256, 8, true});
  add({"", DType::kQ4_K, false, false, true, false, 13, 2, 200, 256, 8});
  add({"", DType::kQ6_K, true, true, true, true, 150, 2, 96, 256, 4});
  add({"", DType::kQ6_K, false, false, true, false, 13, 2, 130, 256, 8});
  add({"", DType::kIQ4_XS, true, true, true, true, 13, 2, 128, 256, 8});
  add({"", DType::kIQ4_XS, false, false, false, true, 77, 1, 256, 256, 1});
  add({"", DType::kQ8_0, true, true, false, true, 77, 1, 64, 256, 1});
  // 16/32-bit storage, K = 64 (two steps); the other block formats once each.
  add({"", DType::kF32, false, false, true, false, 13, 2, 128, 64, 8});
  add({"", DType::kF32, true, true, true, true, 13, 2, 64, 96, 8});
  add({"", DType::kBF16, false, false, true, false, 13, 2, 128, 64, 8});
  add({"", DType::kBF16, true, false, true, true, 13, 2, 64, 64, 8});
  add({"", DType::kF16, false, false, true, false, 13, 2, 128, 64, 8});
  add({"", DType::kF16, true, true, true, true, 13, 2, 64, 64, 8});
  add({"", DType::kQ4_0, true, true, true, true, 13, 2, 64, 64, 8});
  add({"", DType::kQ4_1, false, false, true, false, 13, 2, 64, 64, 8});
  add({"", DType::kQ5_0, true, true, true, true, 13, 2, 64, 64, 8});
  add({"", DType::kQ5_1, false, false, true, false, 13, 2, 64, 64, 8});
  add({"", DType::kQ2_K, false, false, true, false, 13, 2, 64, 256, 8});
  add({"", DType::kQ3_K, true, true, true, true, 13, 2, 64, 256, 8});
  add({"", DType::kQ5_K, true, true, true, true, 13, 2, 64, 256, 8});
  add({"", DType::kIQ4_NL, false, false, true, false, 13, 2, 64, 64, 8});
  add({"", DType::kMXFP4, true, true, true, true, 13, 2, 64, 64, 8});
  // Expert parallelism: the slots of other ranks' experts skipped (rank 1 of 2; rank 3 of 4 with
  // invalid ids too).
  {
    Gemm g{"", DType::kQ8_0, true, true, true, true, 77, 2, 128, 256, 8};
    g.first = 8, g.parts = 2;
    add(g);
    Gemm d{"", DType::kQ4_K, false, false, true, false, 150, 4, 64, 256, 4, true};
    d.first = 12, d.parts = 4;
    add(d);
  }
  uint32_t seed = 11;
  for (const Gemm& g : cases)
    if (want(g.name)) GemmCase(g, seed++);
  if (listing) return failures == 0 ? 0 : 1;
  std::printf("moegemm-emu: %d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
