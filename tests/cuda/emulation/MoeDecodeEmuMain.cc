// The MoE decode path (kernels/cuda/Moe.cc's moe_experts_gemv_q / moe_ffn_gemv_q units: the x
// quantization, gemv_q_moe_swiglu, the h quantization, gemv_q_moe_down or gemv_q_moe + moe_combine)
// on the host emulation (moedecode_run.sh): each case's one-op module goes through the unit's own
// Select and Bind, at a tensor-parallel rank where the case has expert parts, and the launches run
// emulated over host memory. Checked against an f64 reference of the dequantized weights with the
// activations rounded as the kernels round them (q8 x and h): the token's choices of this rank's
// experts weighted and summed (other ranks' choices add nothing: expert parallelism), plus the
// gated shared expert; outputs and scratch NaN-poisoned, a guard past y. `--list` prints the
// module keys the cases launch instead (moedecode_run.sh compiles one MoeDecodeEmuConfig.cc per key).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/formats/Quant.h"
#include "tests/cuda/GemvQuantReference.h"
#include "tests/cuda/emulation/MoeGemmEmu.h"

float emu_half(unsigned short h) { return memra::formats::HalfToFloat(h); }

namespace {

using namespace memra;
using namespace memra::kernels::cuda;
using gemv_quant_reference::kGuard;
using gemv_quant_reference::kPoison;
using gemv_quant_reference::RoundLikeQ8;
using ir::DType;

int failures = 0;
bool listing = false;

uint64_t Addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A weight as the device holds it under --weights blocks (the GGUF's bytes, 16 spare bytes past
// them as the executor allocates) and its dequantized values.
struct HostWeight {
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;
  DeviceMatrix Matrix() const {
    DeviceMatrix m;
    m.data = Addr(bytes.data());
    m.rows = rows;
    m.cols = cols;
    m.stored = dtype;
    m.bytes = static_cast<int64_t>(bytes.size()) - 16;
    return m;
  }
  const float* Row(int64_t r) const { return deq.data() + r * cols; }
};

HostWeight MakeWeight(DType d, int64_t rows, int64_t cols, uint32_t seed, float scale) {
  HostWeight w;
  w.dtype = d;
  w.rows = rows;
  w.cols = cols;
  const int64_t rb = *ir::StorageBytes(d, cols);
  w.bytes.assign(static_cast<size_t>(rb * rows + 16), 0);
  w.deq.resize(static_cast<size_t>(rows * cols));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : v) x = u(rng);
    if (d == DType::kF32) {
      std::memcpy(w.bytes.data() + r * rb, v.data(), cols * 4);
      std::copy(v.begin(), v.end(), w.deq.begin() + r * cols);
      continue;
    }
    const auto gt = static_cast<formats::GgmlType>(ir::InfoOf(d).ggml_id);
    if (!formats::Quantize(gt, absl::MakeConstSpan(v), absl::MakeSpan(w.bytes.data() + r * rb, rb)).ok() ||
        !formats::Dequantize(gt, absl::MakeConstSpan(w.bytes.data() + r * rb, rb),
                             absl::MakeSpan(w.deq.data() + r * cols, cols))
             .ok()) {
      std::printf("FAIL: cannot quantize %s\n", std::string(ir::DTypeName(d)).c_str());
      ++failures;
    }
  }
  return w;
}

// Operand i of the op: a host array (an activation) or a weight.
class EmuBindContext final : public BindContext {
 public:
  EmuBindContext(const ir::Op& op, const OpSelection& sel, const OpShapes& shapes, std::map<unsigned, uint64_t> in,
                 std::map<unsigned, DeviceMatrix> matrices, uint64_t y, uint64_t scratch, int rank, int ranks)
      : BindContext(op, sel, shapes),
        in_(std::move(in)),
        matrices_(std::move(matrices)),
        y_(y),
        scratch_(scratch),
        rank_(rank),
        ranks_(ranks) {}
  absl::StatusOr<llvm::SmallVector<int64_t, 4>> Shape(const ir::Value* v) const override {
    llvm::SmallVector<int64_t, 4> s;
    for (const ir::Dim& d : v->shape().dims()) s.push_back(d.value());
    return s;
  }
  uint64_t In(unsigned i) const override {
    if (auto it = in_.find(i); it != in_.end()) return it->second;
    if (auto it = matrices_.find(i); it != matrices_.end()) return it->second.data;
    return 0;
  }
  absl::StatusOr<DeviceMatrix> Matrix(unsigned i) const override {
    auto it = matrices_.find(i);
    if (it == matrices_.end()) return absl::InvalidArgumentError(absl::StrCat("operand ", i, " is not a matrix"));
    return it->second;
  }
  uint64_t Out(unsigned) const override { return y_; }
  uint64_t Scratch() const override { return scratch_; }
  uint64_t Workspace() const override { return 0; }
  int tp_rank() const override { return rank_; }
  int tp_size() const override { return ranks_; }

 private:
  std::map<unsigned, uint64_t> in_;
  std::map<unsigned, DeviceMatrix> matrices_;
  uint64_t y_, scratch_;
  int rank_, ranks_;
};

struct Case {
  std::string label;
  DType routed;
  bool fused_gate_up = false;
  bool shared = false;
  DType shared_dtype = DType::kQ8_0;
  int64_t Fs = 0;
  int64_t T = 1, k = 2, E = 8, K = 256, F = 128;
  int64_t parts = 1, rank = 0, ranks = 1;  // expert parallelism: rank of ranks holding E of E * parts
  bool ungated = false;                    // moe_ffn_ungated: the shared expert without a gate (weight 1)
  double clamp = 0;                        // the SwiGLU clamp of the routed and shared experts (0: none)
};

std::string Name(const Case& c) {
  return absl::StrCat(
      c.ungated  ? "moe_ffn_ungated "
      : c.shared ? "moe_ffn "
                 : "moe_experts ",
      c.label, c.clamp > 0 ? absl::StrCat(" clamp ", c.clamp) : std::string(), " T=", c.T, " k=", c.k, " E=", c.E,
      c.parts > 1 ? absl::StrCat(" (rank ", c.rank, " of ", c.ranks, ", ", c.E * c.parts, " routed)") : std::string());
}

std::string ModuleText(const Case& c) {
  const std::string rt(ir::DTypeName(c.routed)), st(ir::DTypeName(c.shared_dtype));
  std::string s = absl::StrCat("weight @down : ", rt, "[", c.E, ", ", c.K, ", ", c.F, "]\n");
  if (c.fused_gate_up) {
    absl::StrAppend(&s, "weight @gate_up : ", rt, "[", c.E, ", ", 2 * c.F, ", ", c.K, "]\n");
  } else {
    absl::StrAppend(&s, "weight @gate : ", rt, "[", c.E, ", ", c.F, ", ", c.K, "]\n");
    absl::StrAppend(&s, "weight @up : ", rt, "[", c.E, ", ", c.F, ", ", c.K, "]\n");
  }
  if (c.shared && !c.ungated) absl::StrAppend(&s, "weight @sh_gate_inp : f32[1, ", c.K, "]\n");
  if (c.shared)
    absl::StrAppend(&s, "weight @sh_gate : ", st, "[", c.Fs, ", ", c.K, "]\nweight @sh_up : ", st, "[", c.Fs, ", ", c.K,
                    "]\nweight @sh_down : ", st, "[", c.K, ", ", c.Fs, "]\n");
  const std::string experts = c.fused_gate_up ? "@down, @gate_up" : "@down, @gate, @up";
  std::vector<std::string> attr_list;
  if (c.clamp > 0) attr_list.push_back(absl::StrCat("clamp = ", c.clamp));
  if (c.parts > 1) attr_list.push_back(absl::StrCat("expert_parts = ", c.parts));
  const std::string attrs = attr_list.empty() ? std::string() : absl::StrCat(" {", absl::StrJoin(attr_list, ", "), "}");
  absl::StrAppend(&s, "func @f(%x: f32[", c.T, ", ", c.K, "], %w: f32[", c.T, ", ", c.k, "], %ids: i32[", c.T, ", ",
                  c.k, "]) -> (f32[", c.T, ", ", c.K, "]) {\n  %y = ",
                  c.ungated  ? absl::StrCat("moe_ffn_ungated(%x, %w, %ids, @sh_gate, @sh_up, @sh_down, ", experts)
                  : c.shared ? absl::StrCat("moe_ffn(%x, %w, %ids, @sh_gate_inp, @sh_gate, @sh_up, @sh_down, ", experts)
                             : absl::StrCat("moe_experts(%x, %w, %ids, ", experts),
                  ")", attrs, " : f32[", c.T, ", ", c.K, "]\n  return %y\n}\n");
  return s;
}

double Silu(double g) { return g / (1.0 + std::exp(-g)); }

void RunCase(const Case& c, uint32_t seed) {
  const std::string name = Name(c);
  auto m = ir::ParseModule(ModuleText(c));
  if (!m.ok()) {
    std::printf("FAIL %s: %s\n", name.c_str(), std::string(m.status().message()).c_str());
    ++failures;
    return;
  }
  const ir::Op& op = *(*m)->function("f")->Ops().front();
  const Target tg = *TargetPreset("sm_90");
  auto shapes = ShapesAt(op, c.T, WeightMode::kBlocks);
  const GpuOpImpl* unit = FindGpuOpImpl(c.ungated  ? "moe_ffn_ungated_gemv_q"
                                        : c.shared ? "moe_ffn_gemv_q"
                                                   : "moe_experts_gemv_q");
  if (!shapes.ok() || unit == nullptr) {
    std::printf("FAIL %s: no shapes or unit\n", name.c_str());
    ++failures;
    return;
  }
  auto sel = unit->Select(SelectContext{op, *shapes, tg});
  if (!sel.ok() || !sel->has_value()) {
    std::printf("FAIL %s: not selected: %s\n", name.c_str(),
                sel.ok() ? "nullopt" : std::string(sel.status().message()).c_str());
    ++failures;
    return;
  }
  const OpSelection& s = **sel;
  if (listing) {
    for (const Launch& l : s.launches) std::printf("%s\n", l.kernel.module.Key().c_str());
    return;
  }

  // Operands: x, w, ids, [[sh_gate_inp,] sh_gate, sh_up, sh_down,] down, gate_up | gate, up.
  const int64_t T = c.T, K = c.K, F = c.F, E = c.E, k = c.k, routed = E * c.parts;
  const int64_t first = c.parts > 1 ? c.rank * c.parts / c.ranks * E : 0;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(static_cast<size_t>(T * K));
  for (float& v : x) v = normal(rng);
  std::vector<int32_t> ids;
  std::vector<float> wts;
  for (int64_t t = 0; t < T; ++t) {
    std::set<int32_t> chosen;
    while (static_cast<int64_t>(chosen.size()) < k) chosen.insert(static_cast<int32_t>(rng() % routed));
    std::vector<int32_t> v(chosen.begin(), chosen.end());
    std::shuffle(v.begin(), v.end(), rng);
    ids.insert(ids.end(), v.begin(), v.end());
    for (int64_t j = 0; j < k; ++j) wts.push_back(0.1f + 0.9f * std::uniform_real_distribution<float>()(rng));
  }
  const HostWeight down = MakeWeight(c.routed, E * K, F, seed * 3 + 1, 0.2f);
  HostWeight gate, up;
  if (c.fused_gate_up) {
    gate = MakeWeight(c.routed, E * 2 * F, K, seed * 3 + 2, 0.2f);
  } else {
    gate = MakeWeight(c.routed, E * F, K, seed * 3 + 2, 0.2f);
    up = MakeWeight(c.routed, E * F, K, seed * 3 + 3, 0.2f);
  }
  HostWeight sg_inp, sg, su, sd;
  std::map<unsigned, uint64_t> in = {{0, Addr(x.data())}, {1, Addr(wts.data())}, {2, Addr(ids.data())}};
  std::map<unsigned, DeviceMatrix> mats;
  unsigned base = 3;
  if (c.shared) {
    sg_inp = MakeWeight(DType::kF32, 1, K, seed * 5 + 1, 0.2f);
    sg = MakeWeight(c.shared_dtype, c.Fs, K, seed * 5 + 2, 0.2f);
    su = MakeWeight(c.shared_dtype, c.Fs, K, seed * 5 + 3, 0.2f);
    sd = MakeWeight(c.shared_dtype, K, c.Fs, seed * 5 + 4, 0.2f);
    if (!c.ungated) mats[base++] = sg_inp.Matrix();
    mats[base] = sg.Matrix(), mats[base + 1] = su.Matrix(), mats[base + 2] = sd.Matrix();
    base += 3;
  }
  mats[base] = down.Matrix();
  mats[base + 1] = gate.Matrix();
  if (!c.fused_gate_up) mats[base + 2] = up.Matrix();
  std::vector<uint32_t> y(static_cast<size_t>(T * K + kGuard), kPoison);
  std::vector<uint32_t> scratch(static_cast<size_t>(s.scratch_bytes / 4 + 64), kPoison);
  EmuBindContext ctx(op, s, *shapes, in, mats, Addr(y.data()), Addr(scratch.data()), static_cast<int>(c.rank),
                     static_cast<int>(c.ranks));
  DeviceWork work;
  if (absl::Status st = unit->Bind(ctx, work); !st.ok()) {
    std::printf("FAIL %s: bind: %s\n", name.c_str(), std::string(st.message()).c_str());
    ++failures;
    return;
  }
  for (const DeviceAction& a : work.actions()) {
    const auto* kc = std::get_if<KernelCall>(&a);
    if (kc == nullptr) {
      std::printf("FAIL %s: a device action other than a kernel\n", name.c_str());
      ++failures;
      return;
    }
    const Launch& l = s.launches.at(kc->launch);
    const std::string key = l.kernel.ToString();
    if (MgEmuFind(key) == nullptr) {
      std::printf("FAIL %s: no emulated module %s\n", name.c_str(), key.c_str());
      ++failures;
      return;
    }
    MgEmuLaunch(key, l.grid, l.block, kc->params.bytes.data());
  }

  // The reference: q8 x into the gate/up products, q8 h into the downs (f64 sums).
  const std::vector<float> xr = RoundLikeQ8(x);
  auto dot = [](const float* a, const float* b, int64_t n) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
    return acc;
  };
  auto ffn = [&](const float* xt, const float* gate_rows, const float* up_rows, const HostWeight& dn, int64_t dn_row0,
                 int64_t width, std::vector<double>& out) {
    std::vector<float> h(static_cast<size_t>(width));
    for (int64_t n = 0; n < width; ++n) {
      double g = Silu(dot(xt, gate_rows + n * K, K)), u = dot(xt, up_rows + n * K, K);
      if (c.clamp > 0) g = std::min(g, c.clamp), u = std::clamp(u, -c.clamp, c.clamp);
      h[n] = static_cast<float>(g * u);
    }
    const std::vector<float> hr = RoundLikeQ8(h);
    out.assign(static_cast<size_t>(K), 0.0);
    for (int64_t r = 0; r < K; ++r) out[r] = dot(hr.data(), dn.Row(dn_row0 + r), width);
  };
  double num = 0, den = 0;
  int unwritten = 0, overwritten = 0, foreign = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> want(static_cast<size_t>(K), 0.0), o;
    const float* xt = xr.data() + t * K;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[t * k + j] - first;
      if (e < 0 || e >= E) {  // another rank's expert: adds nothing here
        ++foreign;
        continue;
      }
      const float* g = c.fused_gate_up ? gate.Row(e * 2 * F) : gate.Row(e * F);
      const float* u = c.fused_gate_up ? gate.Row(e * 2 * F + F) : up.Row(e * F);
      ffn(xt, g, u, down, e * K, F, o);
      for (int64_t r = 0; r < K; ++r) want[r] += wts[t * k + j] * o[r];
    }
    if (c.shared) {
      const double gl = c.ungated ? 1.0 : 1.0 / (1.0 + std::exp(-dot(x.data() + t * K, sg_inp.Row(0), K)));
      ffn(xt, sg.Row(0), su.Row(0), sd, 0, c.Fs, o);
      for (int64_t r = 0; r < K; ++r) want[r] += gl * o[r];
    }
    for (int64_t r = 0; r < K; ++r) {
      float got;
      std::memcpy(&got, &y[t * K + r], 4);
      if (!std::isfinite(got)) {
        ++unwritten;
        continue;
      }
      num += (got - want[r]) * (got - want[r]);
      den += want[r] * want[r];
    }
  }
  for (int64_t i = 0; i < kGuard; ++i) overwritten += y[T * K + i] != kPoison;
  // Every choice another rank's (and no shared expert): y must be exactly 0.
  const double nmse = den > 0 ? num / den : num == 0 ? 0 : 1;
  // q8 h rounded from the kernel's f32 h and from the f64 one may land on neighbouring steps.
  const bool ok = unwritten == 0 && overwritten == 0 && nmse <= 1e-6;
  failures += !ok;
  std::printf("%-4s %-72s nmse %9.2e  (%d of %lld choices another rank's)%s\n", ok ? "ok" : "FAIL", name.c_str(), nmse,
              foreign, static_cast<long long>(T * k),
              unwritten || overwritten
                  ? absl::StrCat("  ", unwritten, " unwritten, ", overwritten, " overwritten").c_str()
                  : "");
}

}  // namespace

int main(int argc, char** argv) {
  listing = argc > 1 && std::string(argv[1]) == "--list";
  const std::string only = argc > 1 && !listing ? argv[1] : "";
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  for (int64_t T : {1, 3}) {
    // No expert parallelism (the path every single-GPU MoE runs), then rank 0 and 1 of 2.
    add({"q8_0", DType::kQ8_0, false, false, DType::kQ8_0, 0, T});
    for (int64_t r : {0, 1}) add({"q8_0", DType::kQ8_0, false, false, DType::kQ8_0, 0, T, 2, 8, 256, 128, 2, r, 2});
  }
  // The fused gate_up, 4 choices of 32 experts at rank 3 of 4.
  add({"q8_0 fused gate_up", DType::kQ8_0, true, false, DType::kQ8_0, 0, 2, 4, 8, 256, 128, 4, 3, 4});
  // A shared expert in the routed launches (the fused down: weighted sum + gated shared in one).
  add({"q8_0 + q8_0 shared", DType::kQ8_0, false, true, DType::kQ8_0, 128, 2});
  add({"q8_0 + q8_0 shared", DType::kQ8_0, false, true, DType::kQ8_0, 128, 2, 2, 8, 256, 128, 2, 1, 2});
  // A shared expert of another format: its launches apart, the downs then moe_combine.
  add({"q4_0 + q8_0 shared", DType::kQ4_0, false, true, DType::kQ8_0, 128, 3});
  add({"q4_0 + q8_0 shared", DType::kQ4_0, false, true, DType::kQ8_0, 128, 3, 2, 8, 256, 128, 2, 0, 2});
  add({"q4_0 + q8_0 shared Fs=256", DType::kQ4_0, false, true, DType::kQ8_0, 256, 1, 2, 8, 256, 128, 2, 1, 2});
  // The most tokens a decode call takes (8), 9 choices each: 72 (token, choice) slots.
  add({"q8_0 + q8_0 shared, 72 slots", DType::kQ8_0, false, true, DType::kQ8_0, 128, 8, 9, 16, 256, 128});
  // The down form's packing: Qwen3.5-35B-A3B's rows (F = 512: 2 q4_K blocks, 8 lanes, so 4 of the 9
  // sub-tiles a chunk), and rows of two chunks (F = 1280 q8_0: 40 blocks, unpacked).
  add({"q4_K + q4_K shared F=512", DType::kQ4_K, false, true, DType::kQ4_K, 512, 1, 8, 16, 256, 512});
  add({"q8_0 + q8_0 shared F=1280", DType::kQ8_0, false, true, DType::kQ8_0, 1280, 2, 3, 8, 256, 1280});
  // Unpacked rows split each tile's sub-tiles over the block's 4 warps: 1 sub-tile (three warps
  // idle), 10 (3, 3, 2, 2), and a 256-element format (q6_K: 5 blocks, 20 lanes a row).
  add({"q8_0 F=1280 k=1", DType::kQ8_0, false, false, DType::kQ8_0, 0, 1, 1, 8, 256, 1280});
  add({"q6_K + q6_K shared F=1280", DType::kQ6_K, false, true, DType::kQ6_K, 1280, 3, 9, 16, 256, 1280});
  // Step 3.5's shared expert has no gate (moe_ffn_ungated: weight 1): in the routed launches (the
  // fused down), clamped (the routed and shared tiles alike), apart (another format: moe_combine
  // adds it), and at rank 1 of 2.
  add({"q4_K + q4_K shared", DType::kQ4_K, false, true, DType::kQ4_K, 256, 1, 3, 8, 256, 256, 1, 0, 1, true});
  add({"q8_0 + q8_0 shared", DType::kQ8_0, false, true, DType::kQ8_0, 128, 2, 2, 8, 256, 128, 1, 0, 1, true, 1.5});
  add({"q4_0 + q8_0 shared", DType::kQ4_0, false, true, DType::kQ8_0, 128, 3, 2, 8, 256, 128, 1, 0, 1, true, 1.5});
  add({"q8_0 + q8_0 shared", DType::kQ8_0, false, true, DType::kQ8_0, 128, 2, 2, 8, 256, 128, 2, 1, 2, true});
  // 256-element blocks (q4_K, F = 256), rank 1 of 2.
  add({"q4_K", DType::kQ4_K, false, false, DType::kQ4_K, 0, 2, 2, 4, 256, 256, 2, 1, 2});
  uint32_t seed = 5;
  for (const Case& c : cases)
    if (only.empty() || Name(c).find(only) != std::string::npos) RunCase(c, seed++);
  if (listing) return failures == 0 ? 0 : 1;
  std::printf("moedecode-emu: %zu cases, %d failure(s)\n", cases.size(), failures);
  return failures == 0 ? 0 : 1;
}
