// The unit of kernels/cuda/FlashAttention.cu and FlashAttentionWgmma.cu: attention and
// attention_gated over more than one token (prefill) on tensor cores, causal or with a sliding
// window, the gate fused. Applies when the op allows bf16 operands (precision = "bf16"), the GQA
// group divides the block's rows, the head dim is a multiple of 16 up to 512 and the target has
// bf16 mma (sm_80+) and the shared memory; otherwise Attention.cc's units run. On sm_90 with head
// dims in panels of 64 the attention itself is the warpgroup-MMA kernel (wgmma, sm_90a). Two launches: the bf16 copy of
// the cache rows the call's keys span into the step's scratch (fewer bytes for every block to stream than an f32 cache,
// and 16-byte cp.async into double buffers), then the attention; a bf16 KV cache
// (--cache-type-k/-v bf16) is read in place, without the copy.
#include <algorithm>
#include <string>

#include "ir/StatusMacros.h"
#include "kernels/cuda/FlashAttentionParams.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {

namespace {

constexpr int64_t kKeyTile = 64;  // FA_BC
constexpr int64_t kMaxDv = 256;   // output columns per block (the O accumulator's registers)
constexpr int kBf16Code = 2;      // StorageCode(kBF16)

struct Geometry {
  int64_t warps, stages, tokens, hq, hkv, d, dv, splits, tb, rows;
  int64_t smem;
};

// `warps` (FA_WARPS): 16 query rows each; `stages` (FA_STAGES): K/V buffers.
std::optional<Geometry> GeometryFor(const OpShapes& s, const Target& t, int64_t warps, int64_t stages) {
  Geometry g;
  g.warps = warps;
  g.stages = stages;
  g.rows = s.in[1][0];
  g.tokens = s.in[0][0];
  g.hq = s.in[0][1];
  g.hkv = s.in[1][1];
  g.d = s.in[0][2];
  const int64_t rows = 16 * warps;
  if (g.hkv <= 0 || g.hq % g.hkv != 0 || rows % (g.hq / g.hkv) != 0) return std::nullopt;
  if (g.d % 16 != 0 || g.d < 16 || g.d > 512) return std::nullopt;
  g.splits = (g.d + kMaxDv - 1) / kMaxDv;
  g.dv = g.d / g.splits;
  if (g.dv % 16 != 0) return std::nullopt;
  g.tb = rows / (g.hq / g.hkv);
  g.smem = (rows * (g.d + 8) + stages * (kKeyTile * (g.d + 8) + kKeyTile * (g.dv + 8))) * 2;  // FA_SMEM_BYTES
  const int64_t limit = std::max(t.smem_per_block, t.smem_per_block_optin);
  if (t.arch < 80 || g.smem > limit) return std::nullopt;
  return g;
}

// FlashAttentionWgmma.cu (sm_90a): `wg` warpgroups of 64 query rows, two K and two V buffers of
// `keys` rows (64, or 32 where 64 do not fit: head dim 512), the panels of 64 columns its swizzled
// layout needs (head dims 64, 128, 256 and 512).
struct WgmmaGeometry {
  int64_t wg, keys, tb, smem;
};
constexpr int64_t kWgmmaRegisters = 65536;  // per SM (sm_90): the O accumulator bounds the rows a block holds

std::optional<WgmmaGeometry> WgmmaGeometryFor(const Geometry& g, const Target& t, int64_t wg) {
  if (t.arch != 90 || g.d % 64 != 0 || g.dv % 64 != 0) return std::nullopt;
  // Head dim 512 takes 32-key tiles (the loop below): two K and two V buffers fit beside Q.
  const int64_t rows = 64 * wg, group = g.hq / g.hkv;
  if (rows % group != 0) return std::nullopt;
  // Registers a thread: O (dv / 2) + S (32) + P (16) + ~50 of addressing and softmax state
  // (ptxas: 242 at dv 256, 158 at dv 128).
  if (128 * wg * (g.dv / 2 + 100) > kWgmmaRegisters) return std::nullopt;
  const int64_t limit = std::max(t.smem_per_block, t.smem_per_block_optin);
  for (int64_t keys : {int64_t{64}, int64_t{32}}) {
    WgmmaGeometry w;
    w.wg = wg;
    w.keys = keys;
    w.tb = rows / group;
    // FW_SMEM_BYTES (with 1 KB to align the start), beside 1 KB of static shared memory.
    w.smem = rows * g.d * 2 + 2 * keys * (g.d + g.dv) * 2 + 1024;
    if (w.smem + 1024 <= limit) return w;
  }
  return std::nullopt;
}

class FlashAttentionImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "flash_attention"; }
  bool Implements(ir::OpKind k) const override {
    return k == ir::OpKind::kAttention || k == ir::OpKind::kAttentionGated;
  }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    if (c.shapes.bucket < 2) return std::optional<OpSelection>();  // decode: split-KV (Attention.cc)
    // Only where the op allows bf16 operands (ir/Ops.def, precision): an f32 model keeps the f32
    // CUDA-core kernels, and with them its exact agreement with the CPU executor.
    const std::string precision = c.op.attrs().GetString("precision").value_or("f32");
    if (precision != "f32" && precision != "bf16")
      return Unsupported(c.op, "attention precision must be \"f32\" or \"bf16\"");
    if (precision != "bf16") return std::optional<OpSelection>();
    // Long prompts: 8 warps (128 rows) per block halve the K/V tile traffic per FLOP; shorter
    // ones keep 4 so more blocks fill the SMs. Groups that divide neither (Step 3.5's 96 query
    // heads over 8 kv heads: 12) take 12 or 6 warps (192 / 96 rows). Two K/V buffers (the next tile
    // in flight) where the shared memory holds them.
    std::optional<Geometry> g;
    for (auto [warps, stages] :
         {std::pair<int64_t, int64_t>{8, 2}, {8, 1}, {4, 2}, {4, 1}, {12, 2}, {12, 1}, {6, 2}, {6, 1}}) {
      if ((warps == 8 || warps == 12) && c.shapes.bucket < 1024) continue;
      if ((g = GeometryFor(c.shapes, c.target, warps, stages))) break;
    }
    if (!g) return std::optional<OpSelection>();
    // On Hopper, the warpgroup-MMA kernel: two warpgroups (128 rows) for long prompts, one for
    // shorter ones (more blocks), three where the GQA group needs 192 rows (12 or 6 heads).
    std::optional<WgmmaGeometry> wgmma;
    const bool long_prompt = c.shapes.bucket >= 1024;
    for (int64_t wg : {long_prompt ? 2 : 1, 3, long_prompt ? 1 : 2})
      if ((wgmma = WgmmaGeometryFor(*g, c.target, wg))) break;
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 1, 2));
    Launch l;
    l.kernel.module.file = "FlashAttention.cu";
    Defines defs = {Def("FA_HQ", g->hq),       Def("FA_HKV", g->hkv),     Def("FA_D", g->d),
                    Def("FA_DV", g->dv),       Def("FA_WARPS", g->warps), Def("FA_STAGES", g->stages),
                    Def("FA_KT", codes.first), Def("FA_VT", codes.second)};
    // A sliding-window ring (ir/Ops.def ring): key j in row j % rows.
    if (c.op.attrs().I64Or("ring", 0) > 0) defs.push_back(Def("FA_RING", c.shapes.in[1][0]));
    // attention_gated's gate per head ([T, Hq, 1]) rather than per element.
    if (c.op.is(ir::OpKind::kAttentionGated) && c.shapes.in[4].size() == 3 && c.shapes.in[4][2] == 1 && g->d != 1)
      defs.push_back(Def("FA_HEAD_GATE", 1));
    l.kernel.module.defines = MakeDefines(std::move(defs));
    OpSelection s;
    // 1. flash_kv_bf16: the bf16 copy of the cache rows the call's keys span (a fixed grid), for
    //    the caches that are not bf16 already.
    const int64_t copies = (codes.first != kBf16Code) + (codes.second != kBf16Code);
    if (copies > 0) {
      Launch copy = l;
      copy.kernel.entry = "flash_kv_bf16";
      copy.block = 256;
      copy.grid = static_cast<uint32_t>(2 * c.target.sm_count);
      s.launches.push_back(copy);
    }
    // 2. flash_attention (or flash_attention_wgmma) over the bf16 rows.
    if (wgmma) {
      Defines wdefs = {Def("FA_HQ", g->hq),       Def("FA_HKV", g->hkv),     Def("FA_D", g->d),
                       Def("FA_DV", g->dv),       Def("FA_WG", wgmma->wg),   Def("FW_BC", wgmma->keys),
                       Def("FA_KT", codes.first), Def("FA_VT", codes.second)};
      for (const auto& d : l.kernel.module.defines)
        if (d.first == "FA_RING" || d.first == "FA_HEAD_GATE") wdefs.push_back(d);
      l.kernel.module.file = "FlashAttentionWgmma.cu";
      l.kernel.module.sm_90a = true;
      l.kernel.module.defines = MakeDefines(std::move(wdefs));
      l.kernel.entry = "flash_attention_wgmma";
      l.block = static_cast<uint32_t>(wgmma->wg * 128);
      l.grid = static_cast<uint32_t>((g->tokens + wgmma->tb - 1) / wgmma->tb * g->hkv * g->splits);
      l.smem = static_cast<uint32_t>(wgmma->smem);
    } else {
      l.kernel.entry = "flash_attention";
      l.block = static_cast<uint32_t>(g->warps * 32);
      l.grid = static_cast<uint32_t>((g->tokens + g->tb - 1) / g->tb * g->hkv * g->splits);
      l.smem = static_cast<uint32_t>(g->smem);
    }
    s.launches.push_back(l);
    s.scratch_bytes = copies * g->rows * g->hkv * g->d * 2;  // the bf16 copies
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto q, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto kc, c.InShape(1));
    FlashAttentionParams p;
    p.q = c.In(0);
    p.k_cache = c.In(1);
    p.v_cache = c.In(2);
    p.pos = c.In(3);
    p.gate = c.op().is(ir::OpKind::kAttentionGated) ? c.In(4) : 0;
    p.o = c.Out(0);
    p.n_tok = static_cast<int>(q[0]);
    p.scale = static_cast<float>(c.op().attrs().F64Or("scale", 1.0));
    p.window = static_cast<int>(c.op().attrs().I64Or("window", 0));
    p.kv_rows = static_cast<int>(kc[0]);
    // A bf16 cache is read in place; the others from their copies, K's first in the scratch.
    const uint64_t copy_bytes = static_cast<uint64_t>(kc[0] * kc[1] * kc[2]) * 2;
    const bool k_bf16 = c.op().operand(1)->dtype() == ir::DType::kBF16,
               v_bf16 = c.op().operand(2)->dtype() == ir::DType::kBF16;
    p.k16 = k_bf16 ? c.In(1) : c.Scratch();
    p.v16 = v_bf16 ? c.In(2) : c.Scratch() + (k_bf16 ? 0 : copy_bytes);
    uint32_t launch = 0;
    if (!k_bf16 || !v_bf16) w.Kernel(launch++, p);
    w.Kernel(launch, p);
    // FLOPs (QK^T and PV) of a causal prefill from position 0, the profile's case; a call that
    // continues a sequence does more (the positions live on the device).
    const double n = static_cast<double>(q[0]), win = static_cast<double>(p.window);
    const double keys = p.window > 0 && win < n ? win * (win + 1) / 2 + (n - win) * win : n * (n + 1) / 2;
    w.Count(4.0 * static_cast<double>(q[1] * q[2]) * keys, 0);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateFlashAttention() { return std::make_unique<FlashAttentionImpl>(); }

}  // namespace memra::kernels::cuda
