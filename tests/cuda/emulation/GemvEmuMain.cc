// Gemv.cu's tokens per launch (GEMV_T) on the host emulation (CudaHostEmulation.h), for
// gemv_run.sh: each case (matmul, matmul_swiglu, matmul_group over f16 / bf16 / f32 weights, K of
// 256 and 4,096 so both the warp-a-row and the split-K forms run, T = 1, 2, 3, 8) is selected by
// the units in the exact decode class and bound by them, the launches run emulated into
// NaN-poisoned outputs with a guard past them, and the result is checked against an f64 reference
// of the stored weights; then every token's row must equal, bit for bit, the same op at T = 1 run
// on that token alone (the exact class's contract). `--list` prints the module keys the cases need.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "kernels/cuda/FixedBindContext.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/formats/Quant.h"
#include "tests/TestUtil.h"

void emu_launch_fn(void (*fn)(const void*), unsigned grid, unsigned block, const void* params);
std::map<std::string, void (*)(const void*)>& Registry() {
  static std::map<std::string, void (*)(const void*)> r;
  return r;
}
void emu_register(const char* key, void (*fn)(const void*)) { Registry()[key] = fn; }
float emu_half(unsigned short h) { return memra::formats::HalfToFloat(h); }

using namespace memra;
using namespace memra::kernels::cuda;
using ir::DType;

namespace {

enum class Kind { kMatMul, kGroup, kSwiglu };
struct Case {
  Kind kind;
  DType dtype;
  std::vector<int64_t> rows;
  int64_t K, T;
  int warp_bytes = 0;        // select-kernels{gemv-warp-bytes} (one token: GEMV_R rows a warp)
  int l2_bytes = 0;          // select-kernels{l2-prefetch-bytes} (a hint: the same bits)
  bool evict_first = false;  // select-kernels{gemv-evict-first} (a hint: the same bits)
  std::string Name() const {
    return absl::StrCat(kind == Kind::kMatMul  ? "matmul"
                        : kind == Kind::kGroup ? "group"
                                               : "swiglu",
                        " ", ir::DTypeName(dtype), "[", absl::StrJoin(rows, ","), "] K=", K, " T=", T,
                        warp_bytes > 0 ? absl::StrCat(" warp-bytes=", warp_bytes) : "",
                        l2_bytes > 0 ? absl::StrCat(" l2-prefetch=", l2_bytes) : "", evict_first ? " evict-first" : "");
  }
};

std::string ModuleText(const Case& c, int64_t T) {
  std::string s;
  for (size_t i = 0; i < c.rows.size(); ++i)
    absl::StrAppend(&s, "weight @w", i, " : ", ir::DTypeName(c.dtype), "[", c.rows[i], ", ", c.K, "]\n");
  std::vector<std::string> types, names, ws;
  const size_t results = c.kind == Kind::kSwiglu ? 1 : c.rows.size();
  for (size_t i = 0; i < results; ++i) {
    types.push_back(absl::StrCat("f32[", T, ", ", c.rows[i], "]"));
    names.push_back(absl::StrCat("%y", i));
  }
  for (size_t i = 0; i < c.rows.size(); ++i) ws.push_back(absl::StrCat("@w", i));
  const char* op = c.kind == Kind::kMatMul ? "matmul" : c.kind == Kind::kGroup ? "matmul_group" : "matmul_swiglu";
  absl::StrAppend(&s, "func @f(%x: f32[", T, ", ", c.K, "]) -> (", absl::StrJoin(types, ", "), ") {\n  ",
                  absl::StrJoin(names, ", "), " = ", op, "(%x, ", absl::StrJoin(ws, ", "),
                  ") : ", absl::StrJoin(types, ", "), "\n  return ", absl::StrJoin(names, ", "), "\n}\n");
  return s;
}

constexpr uint32_t kPoison = 0x7fc00000u;
constexpr size_t kGuard = 64;

// The weights as stored (f16 / bf16 bits, or f32) and their values.
struct Weights {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::vector<double>> values;
};
Weights MakeWeights(const Case& c, uint32_t seed) {
  Weights w;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const std::vector<float> v = memra::testing::RandomNormal(c.rows[i] * c.K, seed + 17 * i, 0.5f);
    std::vector<uint8_t> b;
    std::vector<double> back(v.size());
    if (c.dtype == DType::kF32) {
      b.resize(v.size() * 4);
      std::memcpy(b.data(), v.data(), b.size());
      for (size_t j = 0; j < v.size(); ++j) back[j] = v[j];
    } else {
      b.resize(v.size() * 2);
      auto* h = reinterpret_cast<uint16_t*>(b.data());
      for (size_t j = 0; j < v.size(); ++j) {
        h[j] = c.dtype == DType::kF16 ? formats::FloatToHalf(v[j]) : formats::FloatToBf16(v[j]);
        back[j] = c.dtype == DType::kF16 ? formats::HalfToFloat(h[j]) : formats::Bf16ToFloat(h[j]);
      }
    }
    w.bytes.push_back(std::move(b));
    w.values.push_back(std::move(back));
  }
  return w;
}

// Runs the case's op on x [T, K]; outputs [T, rows_i] each (empty on a selection or bind failure,
// with `why` set). Sets `unwritten` / `overwritten` from the poison and the guard.
std::vector<std::vector<uint32_t>> Run(const Case& c, int64_t T, const Weights& w, const std::vector<float>& x,
                                       bool list, std::string& why, int& unwritten, int& overwritten) {
  static const Target tg = *TargetPreset("sm_90");
  auto m = ir::ParseModule(ModuleText(c, T));
  if (!m.ok()) {
    why = std::string(m.status().message());
    return {};
  }
  const ir::Op& op = *(*m)->function("f")->Ops().front();
  auto shapes = ShapesAt(op, T, WeightMode::kBlocks);
  if (!shapes.ok()) {
    why = std::string(shapes.status().message());
    return {};
  }
  SelectOptions so;
  so.decode_class = DecodeClass::kExact;
  so.gemv_warp_bytes = c.warp_bytes;
  so.l2_prefetch_bytes = c.l2_bytes;
  so.gemv_evict_first = c.evict_first;
  auto sel = SelectGpuOp(op, *shapes, tg, so);
  if (!sel.ok() || !sel->gemv) {
    why = sel.ok() ? absl::StrCat("selected ", sel->impl, ", not a GEMV") : std::string(sel.status().message());
    return {};
  }
  for (const Launch& l : sel->launches) {
    if (list) std::printf("%s\n", l.kernel.module.Key().c_str());
    if (!list && Registry().count(l.kernel.ToString()) == 0) {
      why = "no emulated module " + l.kernel.ToString();
      return {};
    }
  }
  if (list) return {};
  std::vector<DeviceMatrix> mats;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    DeviceMatrix dm;
    dm.data = reinterpret_cast<uint64_t>(w.bytes[i].data());
    dm.rows = c.rows[i];
    dm.cols = c.K;
    dm.stored = c.dtype;
    dm.bytes = static_cast<int64_t>(w.bytes[i].size());
    mats.push_back(dm);
  }
  const size_t outs = c.kind == Kind::kSwiglu ? 1 : c.rows.size();
  std::vector<std::vector<uint32_t>> y(outs);
  std::vector<uint64_t> yp;
  for (size_t o = 0; o < outs; ++o) {
    y[o].assign(T * c.rows[o] + kGuard, kPoison);
    yp.push_back(reinterpret_cast<uint64_t>(y[o].data()));
  }
  FixedBindContext ctx(op, *sel, *shapes, reinterpret_cast<uint64_t>(x.data()), T, mats, yp, 0);
  DeviceWork work;
  if (absl::Status st = FindGpuOpImpl(sel->impl)->Bind(ctx, work); !st.ok()) {
    why = std::string(st.message());
    return {};
  }
  for (const DeviceAction& a : work.actions()) {
    const auto& k = std::get<KernelCall>(a);
    const Launch& l = sel->launches[k.launch];
    emu_launch_fn(Registry().at(l.kernel.ToString()), l.grid, l.block, k.params.bytes.data());
  }
  unwritten = overwritten = 0;
  for (size_t o = 0; o < outs; ++o) {
    for (int64_t i = 0; i < T * c.rows[o]; ++i) unwritten += y[o][i] == kPoison;
    for (size_t g = 0; g < kGuard; ++g) overwritten += y[o][T * c.rows[o] + g] != kPoison;
    y[o].resize(T * c.rows[o]);
  }
  return y;
}

double Silu(double v) { return v / (1.0 + std::exp(-v)); }

}  // namespace

int main(int argc, char** argv) {
  const bool list = argc > 1 && std::string(argv[1]) == "--list";
  std::vector<Case> cases;
  for (DType d : {DType::kF16, DType::kBF16, DType::kF32})
    for (int64_t T : {1, 2, 3, 8}) {
      cases.push_back({Kind::kMatMul, d, {37}, 256, T});   // a warp a row, a partial block of rows
      cases.push_back({Kind::kMatMul, d, {40}, 4096, T});  // split-K (few rows, K <= 4096)
      cases.push_back({Kind::kSwiglu, d, {37, 37}, 512, T});
      cases.push_back({Kind::kGroup, d, {20, 7, 3}, 512, T});
    }
  // One token, 2 or 4 rows a warp: the rows' bits are those of one row a warp (checked below).
  for (DType d : {DType::kF16, DType::kBF16, DType::kF32})
    for (int bytes : {1024, 4096}) {
      cases.push_back({Kind::kMatMul, d, {37}, 256, 1, bytes});
      cases.push_back({Kind::kGroup, d, {20, 7, 3}, 512, 1, bytes});  // a warp's rows straddle two weights
    }
  // The L2 prefetch (a no-op in the emulation: its budget arithmetic runs, the sums must not move):
  // below a weight's bytes, past the first of a group's, not a multiple of 16.
  for (int bytes : {1000, 100000})
    for (int64_t T : {1, 3}) {
      cases.push_back({Kind::kMatMul, DType::kBF16, {37}, 256, T, 0, bytes});
      cases.push_back({Kind::kMatMul, DType::kBF16, {40}, 4096, T, 0, bytes});
      cases.push_back({Kind::kSwiglu, DType::kBF16, {37, 37}, 512, T, 0, bytes});
      cases.push_back({Kind::kGroup, DType::kBF16, {20, 7, 3}, 512, T, 4096, bytes});
    }
  // The weights' loads with an L2 evict_first policy (a plain load in the emulation: the restructured
  // piece load must give the same bits), alone and beside the prefetch.
  for (int bytes : {0, 100000})
    for (int64_t T : {1, 3}) {
      cases.push_back({Kind::kMatMul, DType::kBF16, {37}, 256, T, 0, bytes, true});
      cases.push_back({Kind::kMatMul, DType::kBF16, {40}, 4096, T, 0, bytes, true});
      cases.push_back({Kind::kSwiglu, DType::kBF16, {37, 37}, 512, T, 0, bytes, true});
      cases.push_back({Kind::kGroup, DType::kBF16, {20, 7, 3}, 512, T, 4096, bytes, true});
    }
  int fails = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const Weights w = MakeWeights(c, 11 + static_cast<uint32_t>(ci) * 7);
    const std::vector<float> x = memra::testing::RandomNormal(c.T * c.K, 3 + ci, 1.0f);
    std::string why;
    int unwritten = 0, overwritten = 0;
    const auto y = Run(c, c.T, w, x, list, why, unwritten, overwritten);
    if (list) {
      // The one-token launches the invariance check runs too.
      std::string w1;
      int u1, o1;
      Run(c, 1, w, std::vector<float>(x.begin(), x.begin() + c.K), true, w1, u1, o1);
      Case one = c;  // and one row a warp without the L2 prefetch, which the variants' check runs
      one.warp_bytes = 0;
      one.l2_bytes = 0;
      one.evict_first = false;
      Run(one, c.T, w, x, true, w1, u1, o1);
      continue;
    }
    if (y.empty()) {
      std::printf("FAIL %s: %s\n", c.Name().c_str(), why.c_str());
      ++fails;
      continue;
    }
    // f64 reference of the stored weights.
    double num = 0, den = 0;
    for (size_t o = 0; o < y.size(); ++o)
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t r = 0; r < c.rows[o]; ++r) {
          auto dot = [&](size_t wi) {
            double s = 0;
            for (int64_t k = 0; k < c.K; ++k) s += w.values[wi][r * c.K + k] * x[t * c.K + k];
            return s;
          };
          const double want = c.kind == Kind::kSwiglu ? Silu(dot(0)) * dot(1) : dot(o);
          float got;
          std::memcpy(&got, &y[o][t * c.rows[o] + r], 4);
          num += (got - want) * (got - want);
          den += want * want;
        }
    const double nmse = den > 0 ? num / den : num;
    // Each token alone (T = 1) gives the same bits.
    int64_t differ = 0, compared = 0;
    for (int64_t t = 0; t < c.T && c.T > 1; ++t) {
      const std::vector<float> xt(x.begin() + t * c.K, x.begin() + (t + 1) * c.K);
      std::string w1;
      int u1 = 0, o1 = 0;
      const auto y1 = Run(c, 1, w, xt, false, w1, u1, o1);
      if (y1.empty()) {
        std::printf("FAIL %s: one token: %s\n", c.Name().c_str(), w1.c_str());
        ++fails;
        break;
      }
      for (size_t o = 0; o < y.size(); ++o)
        for (int64_t r = 0; r < c.rows[o]; ++r) {
          ++compared;
          differ += y[o][t * c.rows[o] + r] != y1[o][r];
        }
    }
    // Several rows a warp, or the L2 prefetch: the bits of one row a warp without it.
    if (c.warp_bytes > 0 || c.l2_bytes > 0 || c.evict_first) {
      Case one = c;
      one.warp_bytes = 0;
      one.l2_bytes = 0;
      one.evict_first = false;
      std::string w1;
      int u1 = 0, o1 = 0;
      const auto y1 = Run(one, c.T, w, x, false, w1, u1, o1);
      if (y1.empty()) {
        std::printf("FAIL %s: one row a warp: %s\n", c.Name().c_str(), w1.c_str());
        ++fails;
        continue;
      }
      for (size_t o = 0; o < y.size(); ++o)
        for (size_t i = 0; i < y[o].size(); ++i) {
          ++compared;
          differ += y[o][i] != y1[o][i];
        }
    }
    const bool ok = unwritten == 0 && overwritten == 0 && nmse <= 1e-9 && differ == 0;
    fails += !ok;
    std::printf(
        "%-4s %-40s nmse %9.2e  unwritten %d overwritten %d  rows unlike one token / one row a warp %lld of %lld\n",
        ok ? "ok" : "FAIL", c.Name().c_str(), nmse, unwritten, overwritten, static_cast<long long>(differ),
        static_cast<long long>(compared));
  }
  if (!list) std::printf("%zu cases, %d failed\n", cases.size(), fails);
  return fails ? 1 : 0;
}
