// Units of kernels/cuda/Attention.cu (attention and attention_gated; the gate, o * sigmoid(g),
// is Elementwise.cu's mul_sigmoid_f32 in place as the last launch):
//   attention_split  decode (one token): split-KV over AttentionSplits ranges of the live keys
//                    (cut on the device, so one graph serves every KV length; a sliding window
//                    cuts its last keys), partials in the step's scratch, then attention_combine;
//   attention_group  prefill with GQA groups of 2-8: one block per (token, kv head);
//   attention        otherwise: one block per (token, head).
// Prefill of the geometries FlashAttention.cc takes (windows too) runs there on tensor cores
// instead (GpuOps.def tries it before the two CUDA-core units, which refuse a window).
#include <algorithm>

#include "ir/StatusMacros.h"
#include "kernels/cuda/AttentionParams.h"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {

namespace {

// About two blocks per SM over all heads, at most 64 ranges per head.
int64_t AttentionSplits(const Target& t, int64_t q_heads) {
  return std::clamp<int64_t>(2 * int64_t{t.sm_count} / std::max<int64_t>(q_heads, 1), 1, 64);
}

struct Dims {
  int64_t tokens, hq, hkv, d;
};
Dims DimsOf(const OpShapes& s) { return {s.in[0][0], s.in[0][1], s.in[1][1], s.in[0][2]}; }

Launch AttentionLaunch(const OpShapes& s, int64_t warps, Defines extra, const char* entry, int64_t grid) {
  const Dims d = DimsOf(s);
  Defines defs = {Def("ATT_HQ", d.hq), Def("ATT_HKV", d.hkv), Def("ATT_D", d.d), Def("ATT_BUCKET", s.bucket),
                  Def("ATT_WARPS", warps)};
  defs.insert(defs.end(), extra.begin(), extra.end());
  Launch l;
  l.kernel.module.file = "Attention.cu";
  l.kernel.module.defines = MakeDefines(std::move(defs));
  l.kernel.entry = entry;
  l.block = static_cast<uint32_t>(warps * 32);
  l.grid = static_cast<uint32_t>(grid);
  return l;
}

void AddGate(const SelectContext& c, OpSelection& s) {
  if (c.op.is(ir::OpKind::kAttentionGated))
    s.launches.push_back(GridStrideLaunch(c.target, "Elementwise.cu", "mul_sigmoid_f32", Numel(c.shapes.in[0])));
}

absl::Status BindGate(const BindContext& c, DeviceWork& w) {
  if (!c.op().is(ir::OpKind::kAttentionGated)) return absl::OkStatus();
  MEMRA_ASSIGN_OR_RETURN(auto q, c.InShape(0));
  PairParams g;
  g.a = c.Out(0);
  g.b = c.In(4);
  g.y = c.Out(0);
  g.n = Numel(q);
  w.Kernel(static_cast<uint32_t>(c.selection().launches.size() - 1), g);
  return absl::OkStatus();
}

AttentionParams ParamsOf(const BindContext& c, int n_tok, uint64_t out) {
  AttentionParams p;
  p.q = c.In(0);
  p.k_cache = c.In(1);
  p.v_cache = c.In(2);
  p.pos = c.In(3);
  p.o = out;
  p.n_tok = n_tok;
  p.scale = static_cast<float>(c.op().attrs().F64Or("scale", 1.0));
  p.window = static_cast<int>(c.op().attrs().I64Or("window", 0));
  return p;
}

// attention / attention_group: one launch over the call's tokens writing o, then the gate.
absl::Status BindPerToken(const BindContext& c, DeviceWork& w) {
  MEMRA_ASSIGN_OR_RETURN(auto q, c.InShape(0));
  w.Kernel(0, ParamsOf(c, static_cast<int>(q[0]), c.Out(0)));
  return BindGate(c, w);
}

bool IsAttention(ir::OpKind k) { return k == ir::OpKind::kAttention || k == ir::OpKind::kAttentionGated; }

class AttentionSplitImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "attention_split"; }
  bool Implements(ir::OpKind k) const override { return IsAttention(k); }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const Dims d = DimsOf(c.shapes);
    if (c.shapes.bucket != 1 || d.tokens != 1) return std::optional<OpSelection>();
    const int64_t splits = AttentionSplits(c.target, d.hq);
    OpSelection s;
    Launch split = AttentionLaunch(c.shapes, 8, {Def("ATT_SPLITS", splits)}, "attention_split", d.hq * splits);
    Launch combine = split;
    combine.kernel.entry = "attention_combine";
    combine.block = 32;
    combine.grid = static_cast<uint32_t>(d.hq);
    s.launches = {split, combine};
    AddGate(c, s);
    s.scratch_bytes = d.hq * splits * (d.d + 2) * 4;  // per (head, range): max, sum, acc[D]
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    w.Kernel(0, ParamsOf(c, 1, c.Scratch()));
    AttentionCombineParams m;
    m.part = c.Scratch();
    m.o = c.Out(0);
    w.Kernel(1, m);
    return BindGate(c, w);
  }
};

class AttentionGroupImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "attention_group"; }
  bool Implements(ir::OpKind k) const override { return IsAttention(k); }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_RETURN_IF_ERROR(RefuseSlidingWindow(c.op));
    const Dims d = DimsOf(c.shapes);
    if (c.shapes.bucket < 16 || d.hq % d.hkv != 0 || d.hq / d.hkv < 2 || d.hq / d.hkv > 8)
      return std::optional<OpSelection>();
    // Attention.cu's ATT_GROUP_SMEM at 4 warps: m, l, acc per warp and head within 48 KiB static.
    const int64_t smem = 4 * (d.hq / d.hkv) * (2 + (d.d + 31) / 32 * 32) * 4;
    if (smem > c.target.smem_per_block) return std::optional<OpSelection>();
    OpSelection s;
    s.launches.push_back(AttentionLaunch(c.shapes, 4, {}, "attention_group", d.tokens * d.hkv));
    AddGate(c, s);
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override { return BindPerToken(c, w); }
};

class AttentionImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "attention"; }
  bool Implements(ir::OpKind k) const override { return IsAttention(k); }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_RETURN_IF_ERROR(RefuseSlidingWindow(c.op));
    const Dims d = DimsOf(c.shapes);
    OpSelection s;
    s.launches.push_back(AttentionLaunch(c.shapes, c.shapes.bucket == 1 ? 8 : 4, {}, "attention", d.tokens * d.hq));
    AddGate(c, s);
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override { return BindPerToken(c, w); }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateAttentionSplit() { return std::make_unique<AttentionSplitImpl>(); }
std::unique_ptr<GpuOpImpl> CreateAttentionGroup() { return std::make_unique<AttentionGroupImpl>(); }
std::unique_ptr<GpuOpImpl> CreateAttention() { return std::make_unique<AttentionImpl>(); }

}  // namespace memra::kernels::cuda
