// GemvQuant.cu on the host emulation (CudaHostEmulation.h): the cases go through the units' own
// SelectGemvQuant and Bind (from the build), the kernels run emulated, and the results are checked
// as tests/cuda/GemvQuant_test.cc checks the GPU's: f64 reference of the dequantized blocks, NaN
// poison, a guard past the outputs, x rows past the call's tokens NaN. `--list` prints the module
// keys the cases need (run.sh compiles one GemvQuantEmuConfig.cc per key).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "kernels/cuda/FixedBindContext.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/formats/Quant.h"
#include "tests/cuda/GemvQuantReference.h"

void emu_launch_fn(void (*fn)(const void*), unsigned grid, unsigned block, const void* params);
void emu_set_reverse_blocks(bool reverse);
std::map<std::string, void (*)(const void*)>& Registry() {
  static std::map<std::string, void (*)(const void*)> r;
  return r;
}
void emu_register(const char* key, void (*fn)(const void*)) { Registry()[key] = fn; }
float emu_half(unsigned short h) { return memra::formats::HalfToFloat(h); }

using namespace memra;
using namespace memra::kernels::cuda;
using ir::DType;

enum class Kind { kMatMul, kGroup, kSwiglu };
struct Case {
  Kind kind;
  std::vector<DType> dtypes;
  std::vector<int64_t> rows;
  int64_t K, T, n_tok;
  GemvQuantOptions options;
  std::string Name() const {
    std::vector<std::string> d;
    for (size_t i = 0; i < dtypes.size(); ++i) d.push_back(absl::StrCat(ir::DTypeName(dtypes[i]), "[", rows[i], "]"));
    return absl::StrCat(kind == Kind::kMatMul  ? "matmul"
                        : kind == Kind::kGroup ? "group"
                                               : "swiglu",
                        " ", absl::StrJoin(d, ","), " K=", K, " T=", T, " n=", n_tok,
                        options.x == GemvQuantX::kQ8        ? " q8"
                        : options.x == GemvQuantX::kQ8Block ? " q8-block"
                                                            : " f32",
                        " R=", options.rows, " ST=", options.stages, options.stream > 0 ? " stream" : "",
                        options.x_early ? " x-early" : "", options.pair_dot ? "" : " runs",
                        options.one_scale_form ? " one-scale-form" : "");
  }
};
std::string ModuleText(const Case& c) {
  std::string s;
  for (size_t i = 0; i < c.dtypes.size(); ++i)
    absl::StrAppend(&s, "weight @w", i, " : ", ir::DTypeName(c.dtypes[i]), "[", c.rows[i], ", ", c.K, "]\n");
  std::vector<std::string> types, names, ws;
  const size_t results = c.kind == Kind::kSwiglu ? 1 : c.dtypes.size();
  for (size_t i = 0; i < results; ++i) {
    types.push_back(absl::StrCat("f32[", c.T, ", ", c.rows[i], "]"));
    names.push_back(absl::StrCat("%y", i));
  }
  for (size_t i = 0; i < c.dtypes.size(); ++i) ws.push_back(absl::StrCat("@w", i));
  const char* op = c.kind == Kind::kMatMul ? "matmul" : c.kind == Kind::kGroup ? "matmul_group" : "matmul_swiglu";
  absl::StrAppend(&s, "func @f(%x: f32[", c.T, ", ", c.K, "]) -> (", absl::StrJoin(types, ", "), ") {\n  ",
                  absl::StrJoin(names, ", "), " = ", op, "(%x, ", absl::StrJoin(ws, ", "),
                  ") : ", absl::StrJoin(types, ", "), "\n  return ", absl::StrJoin(names, ", "), "\n}\n");
  return s;
}

std::vector<float> Normal(size_t n, uint32_t seed, float sc) {
  std::mt19937 r(seed);
  std::normal_distribution<float> d(0, sc);
  std::vector<float> v(n);
  for (auto& x : v) x = d(r);
  return v;
}
using gemv_quant_reference::RoundLikeQ8;

int main(int argc, char** argv) {
  const bool list = argc > 1 && std::string(argv[1]) == "--list";
  const Target tg = *TargetPreset("sm_90");
  std::vector<Case> cases;
  const DType fmts[] = {DType::kQ8_0,  DType::kQ4_0,   DType::kQ4_1,  DType::kQ5_0, DType::kQ5_1,
                        DType::kQ2_K,  DType::kQ3_K,   DType::kQ4_K,  DType::kQ5_K, DType::kQ6_K,
                        DType::kMXFP4, DType::kIQ4_NL, DType::kIQ4_XS};
  for (DType d : fmts)
    for (GemvQuantX x : {GemvQuantX::kF32, GemvQuantX::kQ8, GemvQuantX::kQ8Block}) {
      const int64_t k = ir::InfoOf(d).block_elems == 32 ? 1440 : 1280;
      GemvQuantOptions o;
      o.x = x;
      for (int64_t n : {1, 3}) cases.push_back({Kind::kMatMul, {d}, {37}, k, 3, n, o});
      cases.push_back({Kind::kGroup, {d, d, d}, {20, 7, 3}, k, 3, 2, o});
      cases.push_back({Kind::kSwiglu, {d, d}, {37, 37}, k, 3, 3, o});
      cases.push_back({Kind::kMatMul, {d}, {9}, 4096, 1, 1, o});
    }
  // The iq4 formats at every decode token count (T > 8 is a GEMM: Dequant.cu + cuBLASLt), the fused
  // forms at both ends, calls with fewer tokens than selected.
  for (DType d : {DType::kIQ4_NL, DType::kIQ4_XS})
    for (GemvQuantX x : {GemvQuantX::kF32, GemvQuantX::kQ8, GemvQuantX::kQ8Block}) {
      const int64_t k = ir::InfoOf(d).block_elems == 32 ? 1440 : 1280;
      GemvQuantOptions o;
      o.x = x;
      for (int64_t t : {1, 2, 5, 8}) cases.push_back({Kind::kMatMul, {d}, {37}, k, t, t, o});
      for (int64_t t : {1, 8}) {
        cases.push_back({Kind::kGroup, {d, d, d}, {20, 7, 3}, k, t, t, o});
        cases.push_back({Kind::kSwiglu, {d, d}, {37, 37}, k, t, t, o});
      }
      cases.push_back({Kind::kMatMul, {d}, {37}, k, 8, 5, o});
      cases.push_back({Kind::kSwiglu, {d, d}, {37, 37}, k, 8, 3, o});
    }
  {
    GemvQuantOptions o;
    o.x = GemvQuantX::kQ8;
    o.rows = 3;
    o.stages = 2;
    cases.push_back({Kind::kMatMul, {DType::kQ4_K}, {23}, 2048, 3, 3, o});
    o.x = GemvQuantX::kF32;
    o.rows = 4;
    o.stages = 4;
    cases.push_back({Kind::kMatMul, {DType::kQ6_K}, {23}, 5120, 2, 2, o});
    o.rows = 1;
    o.stages = 0;
    o.max_blocks = 2;  // 8 warps loop over 37 tiles
    cases.push_back({Kind::kMatMul, {DType::kQ8_0}, {37}, 1440, 3, 3, o});
    o.x = GemvQuantX::kQ8;
    o.max_blocks = 3;
    cases.push_back({Kind::kSwiglu, {DType::kQ6_K, DType::kQ6_K}, {29, 29}, 1280, 2, 1, o});
    o.x = GemvQuantX::kF32;
    o.max_blocks = 0;
    cases.push_back(
        {Kind::kGroup, {DType::kQ4_K, DType::kQ6_K, DType::kQ4_K, DType::kQ8_0}, {16, 12, 8, 4}, 1024, 2, 2, o});
    // Gemma 4 26B-A4B's widths: the q6_K head's rows (2,816: 2,310 bytes, realigned 16-byte copies)
    // and q8_0 rows of 704 (748 bytes), with the default geometry.
    GemvQuantOptions d;
    cases.push_back({Kind::kMatMul, {DType::kQ6_K}, {37}, 2816, 1, 1, d});
    cases.push_back({Kind::kMatMul, {DType::kQ8_0}, {37}, 704, 1, 1, d});
    // Streamed items (GQ_STREAM): grids small enough that warps start and end inside tiles (a tile
    // of several chunks over two or more warps), the fix-up's order checked by running the blocks
    // in both orders (the outputs must be equal bit for bit).
    GemvQuantOptions st;
    st.x = GemvQuantX::kQ8;
    st.stream = 2;
    st.max_blocks = 3;  // 12 warps over 10 tiles x 6 chunks
    cases.push_back({Kind::kMatMul, {DType::kQ4_K}, {37}, 12288, 1, 1, st});
    st.max_blocks = 5;  // 20 warps over 29 tiles x 6 chunks (gate and up of one row a tile)
    cases.push_back({Kind::kSwiglu, {DType::kQ4_K, DType::kQ4_K}, {29, 29}, 12288, 1, 1, st});
    st.max_blocks = 1;  // 4 warps over 8 tiles x 2 chunks, three weights
    cases.push_back({Kind::kGroup, {DType::kQ4_K, DType::kQ4_K, DType::kQ4_K}, {20, 7, 3}, 4096, 1, 1, st});
    cases.push_back({Kind::kMatMul, {DType::kQ6_K}, {23}, 5120, 1, 1, st});  // realigned 210-byte blocks
    st.max_blocks = 2;
    st.rows = 2;  // two tokens: 4 values a tile
    cases.push_back({Kind::kMatMul, {DType::kQ4_K}, {37}, 4096, 2, 2, st});
    cases.push_back({Kind::kMatMul, {DType::kQ4_K}, {37}, 4096, 2, 1, st});
    st.rows = 1;
    st.max_blocks = 2;  // warps inside one tile (12,288 q8_0 columns: 12 chunks; 8 warps, 3 tiles)
    cases.push_back({Kind::kMatMul, {DType::kQ8_0}, {3}, 12288, 1, 1, st});
  }
  // Last, so the cases above keep their data: x loaded before the weights' wait (GQ_XPRE, one token, q8 x): the
  // formats' every alignment and lanes-per-block kind, the plain, group and fused forms.
  for (DType d : {DType::kQ8_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K, DType::kMXFP4, DType::kIQ4_XS})
    for (GemvQuantX x : {GemvQuantX::kQ8, GemvQuantX::kQ8Block}) {
      const int64_t k = ir::InfoOf(d).block_elems == 32 ? 1440 : 1280;
      GemvQuantOptions o, early;
      o.x = early.x = x;
      early.x_early = true;
      // Each early case right after its twin with x loaded after the wait: equal bit for bit.
      for (const GemvQuantOptions& v : {o, early}) cases.push_back({Kind::kMatMul, {d}, {37}, k, 1, 1, v});
      for (const GemvQuantOptions& v : {o, early}) cases.push_back({Kind::kGroup, {d, d, d}, {20, 7, 3}, k, 1, 1, v});
      for (const GemvQuantOptions& v : {o, early}) cases.push_back({Kind::kSwiglu, {d, d}, {37, 37}, k, 1, 1, v});
    }
  // q4_K / q5_K run by run (GQ_PAIR_DOT=0, select-kernels{gemv-q-pair-dot=false}; the default dots a
  // sub-block's two runs as one): one and two tokens, the plain, group and fused forms.
  for (DType d : {DType::kQ4_K, DType::kQ5_K})
    for (GemvQuantX x : {GemvQuantX::kQ8, GemvQuantX::kQ8Block})
      for (int64_t T : {1, 2}) {
        GemvQuantOptions runs;
        runs.x = x;
        runs.pair_dot = false;
        cases.push_back({Kind::kMatMul, {d}, {37}, 1280, T, T, runs});
        cases.push_back({Kind::kGroup, {d, d, d}, {20, 7, 3}, 1280, T, T, runs});
        cases.push_back({Kind::kSwiglu, {d, d}, {37, 37}, 1280, T, T, runs});
      }
  // q4_K / q5_K's scales unpacked by one form (GQ_SCALES=1), each case right after its twin without:
  // equal bit for bit; both dot forms, one and two tokens, q8 x and the f32 path.
  for (DType d : {DType::kQ4_K, DType::kQ5_K})
    for (GemvQuantX x : {GemvQuantX::kQ8, GemvQuantX::kF32})
      for (int64_t T : {1, 2})
        for (bool pairs : {true, false}) {
          GemvQuantOptions o, one;
          o.x = one.x = x;
          o.pair_dot = one.pair_dot = pairs;
          one.one_scale_form = true;
          for (const GemvQuantOptions& v : {o, one}) cases.push_back({Kind::kMatMul, {d}, {37}, 1280, T, T, v});
          for (const GemvQuantOptions& v : {o, one}) cases.push_back({Kind::kSwiglu, {d, d}, {37, 37}, 1280, T, T, v});
        }
  // GQ_EMU_FORMATS=iq4_nl,iq4_xs: only the cases whose weights are all of these formats.
  if (const char* only = std::getenv("GQ_EMU_FORMATS")) {
    const std::string list = absl::StrCat(",", only, ",");
    std::vector<Case> kept;
    for (const Case& c : cases) {
      bool all = true;
      for (DType d : c.dtypes) all &= list.find(absl::StrCat(",", ir::DTypeName(d), ",")) != std::string::npos;
      if (all) kept.push_back(c);
    }
    cases = std::move(kept);
  }
  int fails = 0, skipped = 0;
  std::vector<std::vector<uint32_t>> y_previous;  // the previous case's outputs (an x_early case's twin)
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    auto m = ir::ParseModule(ModuleText(c));
    if (!m.ok()) {
      std::printf("parse: %s\n", std::string(m.status().message()).c_str());
      return 1;
    }
    const ir::Op& op = *(*m)->function("f")->Ops().front();
    auto shapes = ShapesAt(op, c.T, WeightMode::kBlocks);
    auto sel = SelectGemvQuant(op, *shapes, tg, c.options);
    if (!sel) {
      std::printf("FAIL not selected: %s\n", c.Name().c_str());
      ++fails;
      continue;
    }
    bool have = true;
    for (const Launch& l : sel->launches) {
      if (list) std::printf("%s\n", l.kernel.module.Key().c_str());
      have &= Registry().count(l.kernel.ToString()) > 0;
    }
    if (list) continue;
    if (!have) {
      ++skipped;
      std::printf("skip (no config) %s\n", c.Name().c_str());
      continue;
    }
    const int64_t K = c.K, T = c.T, n_tok = c.n_tok;
    // An early or one-scale-form case reads its twin's data.
    const size_t seed = c.options.x_early || c.options.one_scale_form ? ci - 1 : ci;
    std::vector<std::vector<uint8_t>> wb;
    std::vector<std::vector<float>> deq;
    std::vector<DeviceMatrix> mats;
    for (size_t i = 0; i < c.dtypes.size(); ++i) {
      const auto gt = static_cast<formats::GgmlType>(ir::InfoOf(c.dtypes[i]).ggml_id);
      const int64_t rb = *ir::StorageBytes(c.dtypes[i], K);
      auto v = Normal(c.rows[i] * K, 7 + seed * 13 + i, 0.5f);
      std::vector<uint8_t> b(rb * c.rows[i] + 64);
      for (int64_t r = 0; r < c.rows[i]; ++r) {
        auto st =
            formats::Quantize(gt, absl::MakeConstSpan(v.data() + r * K, K), absl::MakeSpan(b.data() + r * rb, rb));
        if (!st.ok()) return 2;
      }
      std::vector<float> back(v.size());
      if (!formats::Dequantize(gt, absl::MakeConstSpan(b.data(), rb * c.rows[i]), absl::MakeSpan(back)).ok()) return 3;
      deq.push_back(back);
      wb.push_back(std::move(b));
      DeviceMatrix dm;
      dm.data = (uint64_t)wb.back().data();
      dm.rows = c.rows[i];
      dm.cols = K;
      dm.stored = c.dtypes[i];
      dm.bytes = rb * c.rows[i];
      mats.push_back(dm);
    }
    auto x = Normal(T * K, seed, 1.0f);
    for (int64_t i = n_tok * K; i < T * K; ++i) x[i] = std::nanf("");
    const size_t outs = c.kind == Kind::kSwiglu ? 1 : c.dtypes.size();
    const bool streamed = std::any_of(sel->launches.begin(), sel->launches.end(), [](const Launch& l) {
      return l.kernel.module.Key().find("GQ_STREAM=1") != std::string::npos;
    });
    if (c.options.stream > 0 && !streamed) {
      std::printf("FAIL not streamed: %s\n", c.Name().c_str());
      ++fails;
      continue;
    }
    std::vector<std::vector<uint32_t>> y_forward;
    for (int pass = 0; pass < (streamed ? 2 : 1); ++pass) {
      emu_set_reverse_blocks(pass == 1);
      std::vector<std::vector<uint32_t>> y(outs);
      std::vector<uint64_t> yp;
      for (size_t o = 0; o < outs; ++o) {
        y[o].assign(T * c.rows[o] + 64, 0x7fc00000u);
        yp.push_back((uint64_t)y[o].data());
      }
      std::vector<uint32_t> scr(sel->scratch_bytes / 4 + 4, 0x7fc00000u);
      FixedBindContext ctx(op, *sel, *shapes, (uint64_t)x.data(), n_tok, mats, yp,
                           sel->scratch_bytes ? (uint64_t)scr.data() : 0);
      const char* unit = c.kind == Kind::kMatMul ? "gemv_q" : c.kind == Kind::kGroup ? "gemv_q_group" : "gemv_q_swiglu";
      DeviceWork work;
      auto st = FindGpuOpImpl(unit)->Bind(ctx, work);
      if (!st.ok()) {
        std::printf("FAIL bind %s: %s\n", c.Name().c_str(), std::string(st.message()).c_str());
        ++fails;
        continue;
      }
      for (const DeviceAction& a : work.actions()) {
        const auto& k = std::get<KernelCall>(a);
        const Launch& l = sel->launches[k.launch];
        emu_launch_fn(Registry().at(l.kernel.ToString()), l.grid, l.block, k.params.bytes.data());
      }
      emu_set_reverse_blocks(false);
      if (streamed) {
        // The counters (after the q8 x; one per tile, zeroed by quantize_x over a NaN poison) are zero
        // again after the launch.
        const std::string key = sel->launches.back().kernel.module.Key();
        const size_t at = key.find("GQ_R=");
        const int64_t R = at == std::string::npos ? 1 : std::atoll(key.c_str() + at + 5);
        int64_t tiles = 0;
        for (size_t i = 0; i < (c.kind == Kind::kSwiglu ? 1 : c.rows.size()); ++i) tiles += (c.rows[i] + R - 1) / R;
        const size_t first = static_cast<size_t>((T * K + T * (K / 32) * 4 + T * (K / 16) * 4 + 255) / 256 * 256 / 4);
        int64_t nonzero = 0;
        for (int64_t i = 0; i < tiles; ++i) nonzero += scr[first + i] != 0;
        if (pass == 0) y_forward = y;
        if (pass == 1 && y != y_forward) {
          std::printf("FAIL %s: the blocks in reverse order give other bits\n", c.Name().c_str());
          ++fails;
        }
        if (nonzero != 0) {
          std::printf("FAIL %s: %lld counters not zero after the launch\n", c.Name().c_str(), (long long)nonzero);
          ++fails;
        }
      }
      // A case built to equal its twin (the case before it, the same data) bit for bit: its define in
      // the module, the same outputs.
      struct Twin {
        bool on;
        const char* define;
        const char* what;
      };
      for (const Twin& tw : {Twin{c.options.x_early, "GQ_XPRE=1", "x loaded early"},
                             Twin{c.options.one_scale_form, "GQ_SCALES=1", "the one scale form"}}) {
        if (!tw.on) continue;
        const bool keyed = sel->launches.back().kernel.module.Key().find(tw.define) != std::string::npos;
        if (!keyed || y != y_previous) {
          std::printf("FAIL %s: %s\n", c.Name().c_str(),
                      keyed ? absl::StrCat(tw.what, " gives other bits than its twin").c_str()
                            : absl::StrCat(tw.define, " not in the module").c_str());
          ++fails;
        }
      }
      y_previous = y;
      const bool q8 = c.options.x != GemvQuantX::kF32;
      const auto xr = q8 ? RoundLikeQ8(x) : x;
      const auto score =
          gemv_quant_reference::ScoreOutputs(c.kind == Kind::kSwiglu, deq, c.rows, K, T, n_tok, x, xr, y);
      const double e = score.nmse, er = score.nmse_r;
      const int unw = score.unwritten, over = score.overwritten;
      const bool ok = unw == 0 && over == 0 && e <= (q8 ? 3e-4 : 1e-9) && er <= 1e-9;
      fails += !ok;
      // bits: FNV-1a of the outputs' bits, so a change meant to keep the sums bit for bit can be
      // compared with a run before it (diff the two logs).
      uint32_t bits = 2166136261u;
      for (const auto& out : y)
        for (const uint32_t v : out) bits = (bits ^ v) * 16777619u;
      std::printf("%-4s %-70s nmse %9.2e  nmse(x~) %9.2e  unwritten %d overwritten %d  bits %08x%s\n",
                  ok ? "ok" : "FAIL", c.Name().c_str(), e, er, unw, over, bits, pass == 1 ? " (blocks reversed)" : "");
    }
  }
  if (!list) std::printf("%zu cases, %d failed, %d skipped\n", cases.size(), fails, skipped);
  return fails ? 1 : 0;
}
