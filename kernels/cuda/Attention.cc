// Units of kernels/cuda/Attention.cu (attention and attention_gated; the gate, o * sigmoid(g),
// is applied by attention_split's merge at decode, elsewhere by Elementwise.cu's
// mul_sigmoid_f32, or mul_sigmoid_rows_f32 for a gate per head, in place as the last launch; and
// gated_attention_step, whose merge applies the gate):
//   attention_split  decode (one token): split-KV, one block per (kv head, query heads of its
//                    group, range of the live keys), ranges cut on the device (so one graph
//                    serves every KV length; a sliding window cuts its last keys), partials in
//                    the step's scratch, merged by each head chunk's last block (one launch; its
//                    arrival tickets are the selection's ticket words); head dims that are
//                    multiples of 64 (16-bit rows in whole words per lane);
//   attention_group  prefill with GQA groups of 2-8: one block per (token, kv head);
//   attention        otherwise: one block per (token, head).
// All read a sliding window (`window`: a query's last keys). Prefill of the geometries
// FlashAttention.cc takes runs there on tensor cores instead (GpuOps.def tries it first; precision
// bf16 only, so f32 models keep these exact f32 kernels).
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/AttentionParams.h"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/Q8Companion.h"
#include "llvm/ADT/ArrayRef.h"

namespace memra::kernels::cuda {

namespace {

// Ranges per (kv head, head chunk): about three blocks per SM (the 16-bit kernel's residency) at a long context (a
// short one fills fewer: attention_split's chunks have a minimum length), at most 256.
int64_t AttentionSplits(const Target& t, int64_t head_blocks) {
  return std::clamp<int64_t>(3 * int64_t{t.sm_count} / std::max<int64_t>(head_blocks, 1), 1, 256);
}

// Query heads per attention_split block: the largest divisor of the group whose q and acc
// registers (heads x D / 32 each) stay within 32.
int64_t SplitHeads(int64_t group, int64_t d) {
  int64_t gh = 1;
  for (int64_t c = 1; c <= group; ++c)
    if (group % c == 0 && c * (d / 32) <= 32) gh = c;
  return gh;
}

// The rows of the op's caches when they are sliding-window rings (ir/Ops.def ring), else 0.
int64_t RingRows(const SelectContext& c) { return c.op.attrs().I64Or("ring", 0) > 0 ? c.shapes.in[1][0] : 0; }

struct Dims {
  int64_t tokens, hq, hkv, d;
};
Dims DimsOf(const OpShapes& s) { return {s.in[0][0], s.in[0][1], s.in[1][1], s.in[0][2]}; }

// The split-KV module's defines with ATT_MERGE (Attention.cu merge_if_last: the ranges merged by
// each head chunk's last block, not by an attention_combine launch).
Defines WithMerge(Defines d) {
  d.push_back(Def("ATT_MERGE", 1));
  return MakeDefines(std::move(d));
}
// The split-KV launches: the split merging in its last blocks (one ticket word a head chunk), or
// with select-kernels{last-block-merge=false} the split, then attention_combine (a block of
// ATT_CW warps a query head; with select-kernels{combine-early-loads} its first loads early,
// Attention.cu ATT_MERGE_EARLY).
std::vector<Launch> MergedOrCombined(const SelectContext& c, Launch split, int64_t hq, int64_t head_chunks,
                                     OpSelection* s) {
  if (c.options.last_block_merge) {
    split.kernel.module.defines = WithMerge(split.kernel.module.defines);
    s->ticket_words = head_chunks;
    return {split};
  }
  if (c.options.combine_early_loads) {  // one module for both launches (the split ignores it)
    Defines d = split.kernel.module.defines;
    d.push_back(Def("ATT_MERGE_EARLY", 1));
    split.kernel.module.defines = MakeDefines(std::move(d));
  }
  Launch combine = split;
  combine.kernel.entry = "attention_combine";
  combine.block = 128;  // Attention.cu ATT_CW warps
  combine.grid = static_cast<uint32_t>(hq);
  return {split, combine};
}

// A define's value in a launch's module (0 when absent or not a number).
int64_t DefineOf(const Launch& l, absl::string_view name) {
  int64_t v = 0;
  for (const auto& [n, value] : l.kernel.module.defines)
    if (n == name && absl::SimpleAtoi(value, &v)) return v;
  return 0;
}

// A one-launch record merges (its module has ATT_MERGE) and has a ticket for each of its head
// chunks (grid / ATT_SPLITS) to do it with.
bool MergesInSplit(const BindContext& c) {
  const OpSelection& s = c.selection();
  if (s.launches.size() != 1 || c.Tickets() == 0 || DefineOf(s.launches[0], "ATT_MERGE") != 1) return false;
  const int64_t splits = DefineOf(s.launches[0], "ATT_SPLITS");
  return splits > 0 && s.launches[0].grid % splits == 0 && s.ticket_words >= s.launches[0].grid / splits;
}

// ring_rows > 0: the caches are sliding-window rings of that many rows (RingRows).
Launch AttentionLaunch(const OpShapes& s, std::pair<int, int> kv_codes, int64_t warps, Defines extra, const char* entry,
                       int64_t grid, int64_t ring_rows) {
  const Dims d = DimsOf(s);
  Defines defs = {Def("ATT_HQ", d.hq),           Def("ATT_HKV", d.hkv),   Def("ATT_D", d.d),
                  Def("ATT_BUCKET", s.bucket),   Def("ATT_WARPS", warps), Def("ATT_KT", kv_codes.first),
                  Def("ATT_VT", kv_codes.second)};
  if (ring_rows > 0) defs.push_back(Def("ATT_RING", ring_rows));
  defs.insert(defs.end(), extra.begin(), extra.end());
  Launch l;
  l.kernel.module.file = "Attention.cu";
  l.kernel.module.defines = MakeDefines(std::move(defs));
  l.kernel.entry = entry;
  l.block = static_cast<uint32_t>(warps * 32);
  l.grid = static_cast<uint32_t>(grid);
  return l;
}

// A gate per head ([T, Hq, 1], Step 3.5's) rather than per element (ir/Ops.def attention_gated).
bool HeadGate(llvm::ArrayRef<int64_t> q, llvm::ArrayRef<int64_t> gate) {
  return gate.size() == 3 && gate[2] == 1 && q.size() == 3 && q[2] != 1;
}

void AddGate(const SelectContext& c, OpSelection& s) {
  if (!c.op.is(ir::OpKind::kAttentionGated)) return;
  const char* entry = HeadGate(c.shapes.in[0], c.shapes.in[4]) ? "mul_sigmoid_rows_f32" : "mul_sigmoid_f32";
  s.launches.push_back(GridStrideLaunch(c.target, "Elementwise.cu", entry, Numel(c.shapes.in[0])));
}

absl::Status BindGate(const BindContext& c, DeviceWork& w) {
  if (!c.op().is(ir::OpKind::kAttentionGated)) return absl::OkStatus();
  MEMRA_ASSIGN_OR_RETURN(auto q, c.InShape(0));
  MEMRA_ASSIGN_OR_RETURN(auto gate, c.InShape(4));
  const uint32_t launch = static_cast<uint32_t>(c.selection().launches.size() - 1);
  if (HeadGate(q, gate)) {
    BroadcastParams g;
    g.a = c.Out(0);
    g.b = c.In(4);
    g.y = c.Out(0);
    g.n = Numel(q);
    g.nb = q[2];
    w.Kernel(launch, g);
    return absl::OkStatus();
  }
  PairParams g;
  g.a = c.Out(0);
  g.b = c.In(4);
  g.y = c.Out(0);
  g.n = Numel(q);
  w.Kernel(launch, g);
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
    if (d.d % 64 != 0 || d.d > 1024 || d.hkv <= 0 || d.hq % d.hkv != 0) return std::optional<OpSelection>();
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 1, 2));
    const int64_t gh = SplitHeads(d.hq / d.hkv, d.d), head_blocks = d.hq / gh;
    const int64_t splits = AttentionSplits(c.target, head_blocks);
    OpSelection s;
    Launch split = AttentionLaunch(c.shapes, codes, 4, {Def("ATT_SPLITS", splits), Def("ATT_GH", gh)},
                                   "attention_split", head_blocks * splits, RingRows(c));
    // attention_gated's output gate is applied by the combine (a head-wise gate, Step 3.5's, by
    // ATT_GATE_HEAD): the same product v * sigmoid(g) a launch of its own would make, one launch fewer.
    if (c.op.is(ir::OpKind::kAttentionGated) && HeadGate(c.shapes.in[0], c.shapes.in[4]))
      split.kernel.module.defines = MakeDefines([&] {
        Defines d = split.kernel.module.defines;
        d.push_back(Def("ATT_GATE_HEAD", 1));
        return d;
      }());
    // One launch: each head chunk's last block merges the ranges (ATT_MERGE; its arrival tickets
    // are the selection's ticket words), so no attention_combine follows.
    s.launches = MergedOrCombined(c, split, d.hq, head_blocks, &s);
    // The merge writes the last values: it can write the q8 companion (select-kernels' pairing).
    const std::optional<Q8Companion> q8 = Q8CompanionOf(c.op);
    if (q8 && q8->result == 0)
      for (Launch& l : s.launches) AddQ8CompanionDefines(*q8, l);
    s.scratch_bytes = d.hq * splits * (d.d + 4) * 4;  // per (head, range): max, sum, 2 pad, acc[D]
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    AttentionParams p = ParamsOf(c, 1, c.Out(0));
    p.part = c.Scratch();
    MEMRA_ASSIGN_OR_RETURN(auto o, c.Shape(c.op().result(0)));
    uint64_t gate = 0;
    int gate_stride = 0;
    const size_t launches = c.selection().launches.size();
    if (launches < 1 || launches > 3) return BindError(c.op(), "attention_split: stale selection (launch count)");
    if (c.op().is(ir::OpKind::kAttentionGated) && !(launches == 3 && !Q8CompanionOf(c.op()).has_value())) {
      MEMRA_ASSIGN_OR_RETURN(auto g, c.InShape(4));  // [1, Hq, D] per element, or [1, Hq, 1] per head
      if (launches > 2 || g.size() != 3 || g[0] != 1 || g[1] != o[1] || (g[2] != o[2] && g[2] != 1))
        return BindError(c.op(), "attention_split: stale selection (the output gate)");
      gate = c.In(4);
      gate_stride = static_cast<int>(g[2]);
    }
    MEMRA_RETURN_IF_ERROR(CheckQ8CompanionBinding(c, Numel(o)));
    if (launches == 1) {  // merged in the split's last blocks
      if (!MergesInSplit(c))
        return BindError(c.op(), "attention_split: stale selection (one launch that does not merge, or no tickets)");
      p.gate = gate;
      p.gate_stride = gate_stride;
      p.tickets = c.Tickets();
      w.Kernel(0, p);
      return absl::OkStatus();
    }
    // The split, then attention_combine (the default, select-kernels{last-block-merge=false});
    // a record of an earlier form: the gate's own launch after a combine without it.
    if (DefineOf(c.selection().launches[0], "ATT_MERGE") != 0)
      return BindError(c.op(), "attention_split: stale selection (a merging split before a combine)");
    w.Kernel(0, p);
    AttentionCombineParams m;
    m.part = c.Scratch();
    m.o = c.Out(0);
    m.gate = gate;
    m.pos = p.pos;
    m.gate_stride = gate_stride;
    m.window = p.window;
    w.Kernel(1, m);
    return launches == 3 ? BindGate(c, w) : absl::OkStatus();
  }
};

// gated_attention_step (one token): attention_step_split (the split-KV blocks, each normalizing
// and rotating its query heads from the projection; the last range's blocks the new key, which
// the first head chunk appends to the caches; each head chunk's last block merges the ranges
// with the gate read from the projection). One launch for what q_gate_split, qk_norm_rope (2),
// kv_append and the gated split-KV attention (3) took seven.
class GatedAttentionStepImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gated_attention_step"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kGatedAttentionStep; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& k = c.shapes.in[0];
    const ir::AttrDict& at = c.op.attrs();
    const int64_t hq = at.I64Or("n_head", 0), hkv = k[1], d = k[2], n_rot = at.I64Or("n_rot", d);
    if (c.shapes.bucket != 1 || k[0] != 1) return Unsupported(c.op, "one token only (the pass forms it for decode)");
    if (d % 64 != 0 || d > 1024) return Unsupported(c.op, "head dim must be a multiple of 64, at most 1024");
    if (hkv <= 0 || hq % hkv != 0) return Unsupported(c.op, "query heads must be a multiple of KV heads");
    if (at.GetString("mode").value_or("neox") != "neox") return Unsupported(c.op, "only neox rope");
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 2, 3));
    const int64_t gh = SplitHeads(hq / hkv, d), head_blocks = hq / gh;
    const int64_t splits = AttentionSplits(c.target, head_blocks);
    Defines defs = {Def("ATT_HQ", hq),           Def("ATT_HKV", hkv),       Def("ATT_D", d),
                    Def("ATT_BUCKET", 1),        Def("ATT_WARPS", 4),       Def("ATT_KT", codes.first),
                    Def("ATT_VT", codes.second), Def("ATT_SPLITS", splits), Def("ATT_GH", gh),
                    Def("ATT_STEP", 1),          Def("ATT_NROT", n_rot)};
    if (at.I64Or("ring", 0) > 0) defs.push_back(Def("ATT_RING", c.shapes.in[2][0]));
    if (c.options.step_early_loads) defs.push_back(Def("ATT_STEP_EARLY", 1));  // select-kernels{step-early-loads}
    Launch split;
    split.kernel.module.file = "Attention.cu";
    split.kernel.module.defines = MakeDefines(std::move(defs));
    split.kernel.entry = "attention_step_split";
    split.block = 128;  // ATT_WARPS warps
    split.grid = static_cast<uint32_t>(head_blocks * splits);
    OpSelection s;
    s.launches = MergedOrCombined(c, split, hq, head_blocks, &s);
    // The merge (gate applied) writes the q8 companion when paired.
    const std::optional<Q8Companion> q8 = Q8CompanionOf(c.op);
    if (q8 && q8->result == 0)
      for (Launch& l : s.launches) AddQ8CompanionDefines(*q8, l);
    s.scratch_bytes = hq * splits * (d + 4) * 4;  // per (head, range): max, sum, 2 pad, acc[D]
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto k, c.InShape(0));
    const ir::AttrDict& at = c.op().attrs();
    const int64_t d = k[2];
    AttentionStepParams p;
    p.qg = c.In(5);
    p.k = c.In(0);
    p.v = c.In(1);
    p.q_w = c.In(6);  // value weights: their f32 values
    p.k_w = c.In(7);
    p.k_cache = c.In(2);
    p.v_cache = c.In(3);
    p.pos = c.In(4);
    p.part = c.Scratch();
    p.scale = static_cast<float>(at.F64Or("scale", 1.0));
    p.window = static_cast<int>(at.I64Or("window", 0));
    p.eps = static_cast<float>(at.F64Or("eps", 0.0));
    // theta_{i+1} = theta_i * base^(-2 / n_rot), formed in f32 as ggml does (Rope.cc's ThetaScale).
    p.theta_scale =
        std::pow(static_cast<float>(at.F64Or("base", 10000.0)), -2.0f / static_cast<float>(at.I64Or("n_rot", d)));
    p.o = c.Out(0);
    p.tickets = c.Tickets();
    MEMRA_ASSIGN_OR_RETURN(auto o, c.Shape(c.op().result(0)));
    MEMRA_RETURN_IF_ERROR(CheckQ8CompanionBinding(c, Numel(o)));
    if (c.selection().launches.size() == 1) {  // merged in the split's last blocks
      if (!MergesInSplit(c))
        return BindError(c.op(),
                         "gated_attention_step: stale selection (one launch that does not merge, or no tickets)");
      w.Kernel(0, p);
      return absl::OkStatus();
    }
    if (c.selection().launches.size() != 2 || DefineOf(c.selection().launches[0], "ATT_MERGE") != 0)
      return BindError(c.op(), "gated_attention_step: stale selection (launch count, or a merging split)");
    w.Kernel(0, p);  // attention_combine after the split (select-kernels{last-block-merge=false})
    AttentionCombineParams m;
    m.part = c.Scratch();
    m.o = c.Out(0);
    m.gate = c.In(5) + static_cast<uint64_t>(d) * 4;  // each head's row of qg: [q | gate]
    m.pos = p.pos;
    m.gate_stride = static_cast<int>(2 * d);
    m.window = p.window;
    w.Kernel(1, m);
    return absl::OkStatus();
  }
};

class AttentionGroupImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "attention_group"; }
  bool Implements(ir::OpKind k) const override { return IsAttention(k); }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const Dims d = DimsOf(c.shapes);
    if (c.shapes.bucket < 16 || d.hq % d.hkv != 0 || d.hq / d.hkv < 2 || d.hq / d.hkv > 8)
      return std::optional<OpSelection>();
    // Attention.cu's ATT_GROUP_SMEM at 4 warps: m, l, acc per warp and head within 48 KiB static.
    const int64_t smem = 4 * (d.hq / d.hkv) * (2 + (d.d + 31) / 32 * 32) * 4;
    if (smem > c.target.smem_per_block) return std::optional<OpSelection>();
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 1, 2));
    OpSelection s;
    s.launches.push_back(AttentionLaunch(c.shapes, codes, 4, {}, "attention_group", d.tokens * d.hkv, RingRows(c)));
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
    const Dims d = DimsOf(c.shapes);
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 1, 2));
    OpSelection s;
    s.launches.push_back(
        AttentionLaunch(c.shapes, codes, c.shapes.bucket == 1 ? 8 : 4, {}, "attention", d.tokens * d.hq, RingRows(c)));
    AddGate(c, s);
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override { return BindPerToken(c, w); }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateAttentionSplit() { return std::make_unique<AttentionSplitImpl>(); }
std::unique_ptr<GpuOpImpl> CreateGatedAttentionStep() { return std::make_unique<GatedAttentionStepImpl>(); }
std::unique_ptr<GpuOpImpl> CreateAttentionGroup() { return std::make_unique<AttentionGroupImpl>(); }
std::unique_ptr<GpuOpImpl> CreateAttention() { return std::make_unique<AttentionImpl>(); }

}  // namespace memra::kernels::cuda
