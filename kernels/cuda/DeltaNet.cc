// Units of kernels/cuda/DeltaNet.cu: the causal depthwise conv (one token: the sequential
// kernel, one launch; many: one thread per (t, c), then the state update) and the gated delta
// scan (sequential in t: a token's latency is the cost; GDN_SPLIT lanes share a state column).
#include <algorithm>

#include "ir/StatusMacros.h"
#include "kernels/cuda/DeltaNetBind.h"
#include "kernels/cuda/DeltaNetParams.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/Q8Companion.h"

namespace memra::kernels::cuda {
namespace {

// conv1d_causal {activation = "silu"} (fuse-delta-net-inputs; the type rules allow no other).
bool Silu(const ir::Op& op) { return op.attrs().GetString("activation").has_value(); }

// x [T, C], w [C, K], state [C, K - 1].
Launch ConvLaunch(const OpShapes& s, const char* entry, bool silu) {
  Launch l;
  l.kernel.module.file = "DeltaNet.cu";
  l.kernel.module.defines =
      MakeDefines({Def("CONV_CHANNELS", s.in[0][1]), Def("CONV_K", s.in[2][1] + 1), Def("CONV_SILU", silu ? 1 : 0)});
  l.kernel.entry = entry;
  l.block = 128;
  l.grid = static_cast<uint32_t>((s.in[0][1] + 127) / 128);
  return l;
}

absl::StatusOr<Conv1dParams> ConvParams(const BindContext& c) {
  MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
  Conv1dParams p;
  p.x = c.In(0);
  p.w = c.In(1);
  p.state = c.In(2);
  p.y = c.Out(0);
  p.n_tok = static_cast<int>(x[0]);
  return p;
}

class Conv1dStepImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "conv1d_step"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kConv1dCausal; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    if (c.shapes.bucket != 1) return std::optional<OpSelection>();
    OpSelection s;
    s.launches.push_back(ConvLaunch(c.shapes, "conv1d_causal", Silu(c.op)));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(Conv1dParams p, ConvParams(c));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class Conv1dTokensImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "conv1d_tokens"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kConv1dCausal; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    Launch conv = ConvLaunch(c.shapes, "conv1d_causal_tokens", Silu(c.op));
    conv.block = 256;
    conv.grid = GridFor(c.target, (c.shapes.in[0][0] + 15) / 16 * c.shapes.in[0][1]);  // DeltaNet.cu's CONV_RUN
    s.launches = {conv, ConvLaunch(c.shapes, "conv1d_state_update", false)};
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(Conv1dParams p, ConvParams(c));
    w.Kernel(0, p);
    w.Kernel(1, p);  // the state update reads x and replaces the state
    return absl::OkStatus();
  }
};

// seq_conv1d_causal (x [T, C], w [C, K], state [S, C, K-1]): the sequential kernel per entry,
// one thread per (entry, channel); the last entry's blocks zero the padding rows.
class SeqConv1dImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "seq_conv1d"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kSeqConv1dCausal; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const int64_t C = c.shapes.in[0][1], S = c.shapes.in[2][0];
    Launch l;
    l.kernel.module.file = "DeltaNet.cu";
    l.kernel.module.defines = MakeDefines(
        {Def("CONV_CHANNELS", C), Def("CONV_K", c.shapes.in[2][2] + 1), Def("CONV_SILU", Silu(c.op) ? 1 : 0)});
    l.kernel.entry = "seq_conv1d_causal";
    l.block = 128;  // DeltaNet.cu's CONV_BLOCKS
    l.grid = static_cast<uint32_t>((S + 1) * ((C + 127) / 128));
    OpSelection s;
    s.launches.push_back(std::move(l));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto slots, c.InShape(3));
    SeqConv1dParams p;
    p.x = c.In(0);
    p.w = c.In(1);
    p.state = c.In(2);
    p.y = c.Out(0);
    p.seq_slot = c.In(3);
    p.seq_start = c.In(4);
    p.n_seq = static_cast<int>(slots[0]);
    p.n_tok = static_cast<int>(x[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// The scan's launch for q [T, HK, DK], v [T, HV, DV]: the module, block and blocks per sequence.
absl::StatusOr<Launch> ScanLaunch(const SelectContext& c, const char* entry) {
  const int64_t Hk = c.shapes.in[0][1], Dk = c.shapes.in[0][2], Hv = c.shapes.in[2][1], Dv = c.shapes.in[2][2];
  if (Dk > 256 || Dk % 2 != 0) return Unsupported(c.op, "key head dim must be even and <= 256");
  const int64_t cols = Dv % 32 == 0 ? 32 : Dv;
  // GDN_SPLIT lanes per state column (a power of two dividing the lanes and Dk / 2), so the
  // per-token dependency chain is Dk / SPLIT long.
  int64_t split = 4;
  while (split > 1 &&
         (Dk % (2 * split) != 0 || (cols * split) % 32 != 0 || cols * split > c.target.max_threads_per_block))
    split /= 2;
  Launch l;
  l.kernel.module.file = "DeltaNet.cu";
  l.kernel.module.defines =
      MakeDefines({Def("GDN_HK", Hk), Def("GDN_HV", Hv), Def("GDN_DK", Dk), Def("GDN_DV", Dv), Def("GDN_COLS", cols),
                   Def("GDN_SPLIT", split), Def("GDN_BUCKET", c.shapes.bucket),
                   Def("GDN_L2", c.op.attrs().Has("qk_l2_eps") ? 1 : 0)});
  l.kernel.entry = entry;
  l.block = static_cast<uint32_t>(cols * split);
  l.grid = static_cast<uint32_t>(Hv * (Dv / cols));
  return l;
}

// seq_gated_delta_scan: the scan's blocks once per entry (+ one set zeroing the padding rows).
class SeqGatedDeltaScanImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "seq_gated_delta_scan"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kSeqGatedDeltaScan; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_ASSIGN_OR_RETURN(Launch l, ScanLaunch(c, "seq_gated_delta_scan"));
    l.grid *= static_cast<uint32_t>(c.shapes.in[5][0] + 1);
    OpSelection s;
    s.launches.push_back(std::move(l));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto slots, c.InShape(6));
    SeqGatedDeltaScanParams p;
    MEMRA_RETURN_IF_ERROR(FillScanParams(c, p));
    p.seq_slot = c.In(6);
    p.seq_start = c.In(7);
    p.n_seq = static_cast<int>(slots[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class GatedDeltaScanImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gated_delta_scan"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kGatedDeltaScan; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_ASSIGN_OR_RETURN(Launch l, ScanLaunch(c, "gated_delta_scan"));
    OpSelection s;
    s.launches.push_back(std::move(l));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    GatedDeltaScanParams p;
    MEMRA_RETURN_IF_ERROR(FillScanParams(c, p));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// delta_net_step, one token (fuse-delta-net-step): a value head's state columns over
// select-kernels{delta-step-split} blocks (1: one block of 512 threads a head), the Hv / Hk heads
// of a key head and their column blocks one cluster (DeltaNet.cu: they share the key head's conv
// rows, and a head's blocks its gated norm).
class DeltaNetStepImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "delta_net_step"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kDeltaNetStep; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& in = c.shapes.in;
    const int64_t T = in[0][0], C = in[0][1], K = in[1][1], Hv = in[6][1], Dv = in[6][2], Dk = in[9][2];
    if (T != 1) return Unsupported(c.op, "one token only (the pass forms it for decode)");
    const int64_t Hk = (C - Hv * Dv) / (2 * Dk);
    constexpr int64_t kLanes = 8;  // DeltaNet.cu DNS_LANES
    if (Dk % 32 != 0 || Dk > 256) return Unsupported(c.op, "key head dim must be a multiple of 32, <= 256");
    if (Dv > 512) return Unsupported(c.op, "value head dim must be <= 512 (a thread per output)");
    const int64_t heads_per_key = Hv / Hk;
    if (heads_per_key > 8) return Unsupported(c.op, "more than 8 value heads per key head (the portable cluster size)");
    const std::optional<Q8Companion> q8 = Q8CompanionOf(c.op);
    const bool companion = q8 && q8->result == 0 && Dv % 32 == 0;
    // The largest split up to the option's that the shape takes: a cluster of at most 8 blocks,
    // whole columns a block, whole 32-element units a block when it writes a q8 companion.
    int64_t split = std::max(1, c.options.delta_step_split);
    while (split > 1 && (heads_per_key * split > 8 || Dv % split != 0 || (companion && (Dv / split) % 32 != 0)))
      split /= 2;
    const int64_t cols = Dv / split;
    // 512 threads for one block a head (two passes over 128 columns); a split block takes a thread
    // per lane of its columns, at least one warp.
    const int64_t threads = split == 1 ? 512 : std::clamp<int64_t>((cols * kLanes + 31) / 32 * 32, 32, 512);
    const int64_t passes = (cols + threads / kLanes - 1) / (threads / kLanes);
    if (passes * Dk / 32 > 16) return Unsupported(c.op, "a head's state past 64 registers a thread");
    Launch l;
    l.kernel.module.file = "DeltaNet.cu";
    std::vector<std::pair<std::string, std::string>> defs = {Def("DNS_HK", Hk), Def("DNS_HV", Hv), Def("DNS_DK", Dk),
                                                             Def("DNS_DV", Dv), Def("CONV_K", K)};
    if (split > 1) {
      defs.push_back(Def("DNS_SPLIT", split));
      defs.push_back(Def("DNS_THREADS", threads));
    }
    l.kernel.module.defines = MakeDefines(defs);
    l.kernel.entry = "delta_net_step";
    l.block = static_cast<uint32_t>(threads);
    l.grid = static_cast<uint32_t>(Hv * split);
    l.cluster = static_cast<uint32_t>(heads_per_key * split);
    // The gated norm's outputs as q8 too (select-kernels' pairing): a warp's 32 of a head each.
    if (companion) AddQ8CompanionDefines(*q8, l);
    OpSelection s;
    s.launches.push_back(std::move(l));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    DeltaNetStepParams p;
    p.x = c.In(0);
    p.conv_w = c.In(1);
    p.b = c.In(2);
    p.a = c.In(3);
    p.dt_bias = c.In(4);
    p.ssm_a = c.In(5);
    p.z = c.In(6);
    p.norm_w = c.In(7);
    p.conv_state = c.In(8);
    p.delta_state = c.In(9);
    p.y = c.Out(0);
    const ir::AttrDict& at = c.op().attrs();
    p.scale = static_cast<float>(at.F64Or("scale", 1.0));
    p.qk_eps = static_cast<float>(at.F64Or("qk_l2_eps", 0.0));
    p.eps = static_cast<float>(at.F64Or("eps", 0.0));
    MEMRA_ASSIGN_OR_RETURN(auto y, c.Shape(c.op().result(0)));
    MEMRA_RETURN_IF_ERROR(CheckQ8CompanionBinding(c, Numel(y)));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateConv1dStep() { return std::make_unique<Conv1dStepImpl>(); }
std::unique_ptr<GpuOpImpl> CreateConv1dTokens() { return std::make_unique<Conv1dTokensImpl>(); }
std::unique_ptr<GpuOpImpl> CreateGatedDeltaScan() { return std::make_unique<GatedDeltaScanImpl>(); }
std::unique_ptr<GpuOpImpl> CreateDeltaNetStep() { return std::make_unique<DeltaNetStepImpl>(); }
std::unique_ptr<GpuOpImpl> CreateSeqConv1d() { return std::make_unique<SeqConv1dImpl>(); }
std::unique_ptr<GpuOpImpl> CreateSeqGatedDeltaScan() { return std::make_unique<SeqGatedDeltaScanImpl>(); }

}  // namespace memra::kernels::cuda
