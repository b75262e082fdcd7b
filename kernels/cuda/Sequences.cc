// Units of kernels/cuda/Sequences.cu: the ops of a step over several sequences (ir/Ops.def,
// "sequences"). Grids cover the bucket's rows and the module's S entries; what varies per step
// (the batch description, positions, block table) is read on the device, so a step's graph
// replays for any batch of its bucket.
#include <algorithm>

#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/SequencesParams.h"

namespace memra::kernels::cuda {
namespace {

constexpr char kFile[] = "Sequences.cu";

class SeqPositionsImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "seq_positions"; }
  bool Implements(ir::OpKind k) const override {
    return k == ir::OpKind::kSeqPositions || k == ir::OpKind::kSeqAdvancePositions;
  }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    OpSelection s;
    if (c.op.is(ir::OpKind::kSeqPositions))
      s.launches.push_back(GridStrideLaunch(c.target, kFile, "seq_positions", c.shapes.in[1][0]));
    else
      s.launches.push_back(GridStrideLaunch(c.target, kFile, "seq_advance_positions", c.shapes.in[1][0]));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    const bool adv = c.op().is(ir::OpKind::kSeqAdvancePositions);
    MEMRA_ASSIGN_OR_RETURN(auto slots, c.InShape(adv ? 1 : 2));
    SeqPositionsParams p;
    p.counter = c.In(0);
    p.n_seq = static_cast<int>(slots[0]);
    if (adv) {
      p.seq_slot = c.In(1);
      p.seq_start = c.In(2);
    } else {
      MEMRA_ASSIGN_OR_RETURN(auto rows, c.InShape(1));
      p.tok_seq = c.In(1);
      p.seq_slot = c.In(2);
      p.seq_start = c.In(3);
      p.pos = c.Out(0);
      p.slot = c.Out(1);
      p.n_tok = static_cast<int>(rows[0]);
    }
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class PagedKvAppendImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "paged_kv_append"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kPagedKvAppend; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& k = c.shapes.in[0];
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 2, 3));
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, "paged_kv_append", Numel(k),
                                          {Def("PG_WIDTH", k[1] * k[2]), Def("PG_BS", c.shapes.in[2][1]),
                                           Def("PG_KT", codes.first), Def("PG_VT", codes.second)}));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto k, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto cache, c.InShape(2));
    MEMRA_ASSIGN_OR_RETURN(auto blocks, c.InShape(4));
    PagedKvAppendParams p;
    p.k = c.In(0);
    p.v = c.In(1);
    p.k_cache = c.In(2);
    p.v_cache = c.In(3);
    p.blocks = c.In(4);
    p.pos = c.In(5);
    p.slot = c.In(6);
    p.n_tok = static_cast<int>(k[0]);
    p.max_blocks = static_cast<int>(blocks[1]);
    p.n_blocks = static_cast<int>(cache[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// Keys per split range: at most 16 ranges over a slot's capacity, at least 256 keys each, a
// multiple of the block. Fixed per module, so a row's ranges depend on its own length only.
struct SplitGeometry {
  int64_t splits, len;
};
SplitGeometry PagedSplits(int64_t capacity, int64_t block) {
  const int64_t splits = std::clamp<int64_t>((capacity + 255) / 256, 1, 16);
  int64_t len = (capacity + splits - 1) / splits;
  len = (len + block - 1) / block * block;
  return {(capacity + len - 1) / len, len};
}

// paged_attention: split-KV for every row (partials in the step's scratch), the combine, and no
// gate (the lowering keeps sigmoid * o as separate ops here).
class PagedAttentionImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "paged_attention"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kPagedAttention; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& q = c.shapes.in[0];
    const auto& cache = c.shapes.in[1];
    const int64_t T = q[0], hq = q[1], d = q[2], hkv = cache[2], bs = cache[1];
    const SplitGeometry g = PagedSplits(c.shapes.in[3][1] * bs, bs);
    MEMRA_ASSIGN_OR_RETURN(auto codes, KvCacheCodes(c, 1, 2));
    const int64_t warps = 4;
    Defines defs = {Def("PA_HQ", hq),       Def("PA_HKV", hkv),         Def("PA_D", d),
                    Def("PA_BS", bs),       Def("PA_SPLITS", g.splits), Def("PA_SPLIT_LEN", g.len),
                    Def("PA_WARPS", warps), Def("PA_KT", codes.first),  Def("PA_VT", codes.second)};
    Launch split;
    split.kernel.module.file = kFile;
    split.kernel.module.defines = MakeDefines(defs);
    split.kernel.entry = "paged_attention_split";
    split.block = static_cast<uint32_t>(warps * 32);
    split.grid = static_cast<uint32_t>(T * hq * g.splits);
    Launch combine = split;
    combine.kernel.entry = "paged_attention_combine";
    combine.block = 32;
    combine.grid = static_cast<uint32_t>(T * hq);
    OpSelection s;
    s.launches = {split, combine};
    s.scratch_bytes = T * hq * g.splits * (d + 2) * int64_t{sizeof(float)};
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto q, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto cache, c.InShape(1));
    MEMRA_ASSIGN_OR_RETURN(auto blocks, c.InShape(3));
    if (c.Scratch() == 0) return BindError(c.op(), "no scratch for the split partials");
    PagedAttentionParams p;
    p.q = c.In(0);
    p.k_cache = c.In(1);
    p.v_cache = c.In(2);
    p.blocks = c.In(3);
    p.pos = c.In(4);
    p.slot = c.In(5);
    p.part = c.Scratch();
    p.o = c.Out(0);
    p.n_tok = static_cast<int>(q[0]);
    p.window = static_cast<int>(c.op().attrs().I64Or("window", 0));
    p.max_blocks = static_cast<int>(blocks[1]);
    p.n_blocks = static_cast<int>(cache[0]);
    p.scale = static_cast<float>(c.op().attrs().F64Or("scale", 1.0));
    w.Kernel(0, p);
    w.Kernel(1, p);
    return absl::OkStatus();
  }
};

class TakeSeqLastRowsImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "take_seq_last_rows"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kTakeSeqLastRows; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    if (c.op.operand(0)->dtype() != ir::DType::kF32) return Unsupported(c.op, "f32 rows only");
    OpSelection s;
    s.launches.push_back(GridStrideLaunch(c.target, kFile, "take_seq_last_rows", Numel(c.shapes.out[0])));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto starts, c.InShape(1));
    TakeSeqLastRowsParams p;
    p.x = c.In(0);
    p.seq_start = c.In(1);
    p.y = c.Out(0);
    p.row = Numel(x) / std::max<int64_t>(x[0], 1);
    p.n_seq = static_cast<int>(starts[0] - 1);
    p.n_tok = static_cast<int>(x[0]);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateSeqPositions() { return std::make_unique<SeqPositionsImpl>(); }
std::unique_ptr<GpuOpImpl> CreatePagedKvAppend() { return std::make_unique<PagedKvAppendImpl>(); }
std::unique_ptr<GpuOpImpl> CreatePagedAttention() { return std::make_unique<PagedAttentionImpl>(); }
std::unique_ptr<GpuOpImpl> CreateTakeSeqLastRows() { return std::make_unique<TakeSeqLastRowsImpl>(); }

}  // namespace memra::kernels::cuda
