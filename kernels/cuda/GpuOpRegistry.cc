#include "kernels/cuda/GpuOpRegistry.h"

#include <algorithm>
#include <memory>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/StatusMacros.h"

namespace memra::kernels::cuda {

#define MEMRA_GPU_OP(F) std::unique_ptr<GpuOpImpl> Create##F();
#include "kernels/cuda/GpuOps.def"

// ---- helpers of GpuOp.h ----

int64_t Numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
int64_t Numel(llvm::ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool GeluGate(const ir::Op& op) { return op.attrs().GetString("activation").value_or("silu") == "gelu"; }

void AddFlagDefine(Launch& l, const char* name, bool on) {
  if (!on) return;
  Defines d = l.kernel.module.defines;
  d.emplace_back(name, "1");
  l.kernel.module.defines = MakeDefines(std::move(d));
}

int64_t L2PrefetchBytesFor(const Target& target, int64_t requested) {
  if (requested <= 0 || target.arch < 90) return 0;
  return target.l2_bytes > 0 ? std::min(requested, target.l2_bytes) : requested;
}

void AddGluClampDefine(Launch& l, const ir::Op& op) {
  const double clamp = op.attrs().F64Or("clamp", 0.0);
  if (!(clamp > 0)) return;
  Defines d = l.kernel.module.defines;
  d.emplace_back("MEMRA_GLU_LIMIT_BITS", std::to_string(absl::bit_cast<uint32_t>(static_cast<float>(clamp))));
  l.kernel.module.defines = MakeDefines(std::move(d));
}

uint32_t GridFor(const Target& t, int64_t n, uint32_t block) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<uint32_t>(std::clamp<int64_t>(blocks, 1, int64_t{t.sm_count} * 16));
}

Launch GridStrideLaunch(const Target& t, const std::string& file, const std::string& entry, int64_t n,
                        Defines defines) {
  Launch l;
  l.kernel.module.file = file;
  l.kernel.module.defines = MakeDefines(std::move(defines));
  l.kernel.entry = entry;
  l.block = 256;
  l.grid = GridFor(t, n);
  return l;
}

absl::Status Unsupported(const ir::Op& op, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("cuda: ", op.Summary(), ": ", why));
}

absl::StatusOr<std::pair<int, int>> KvCacheCodes(const SelectContext& c, unsigned k, unsigned v) {
  const int kc = KvStorageCode(c.shapes.in_dtypes.at(k)), vc = KvStorageCode(c.shapes.in_dtypes.at(v));
  if (kc < 0 || vc < 0)
    return Unsupported(c.op, absl::StrCat("a KV cache of ", ir::DTypeName(c.shapes.in_dtypes.at(kc < 0 ? k : v)),
                                          " (the CUDA kernels store f32, f16, bf16 and q8_0)"));
  // q8_0 rows are whole blocks: the kernels quantize and read a block within one head's row.
  for (unsigned i : {k, v})
    if (KvStorageCode(c.shapes.in_dtypes.at(i)) == 3 &&
        (c.shapes.in.at(i).empty() || c.shapes.in.at(i).back() % 32 != 0))
      return Unsupported(c.op, "a q8_0 KV cache needs a head size that is a multiple of 32");
  return std::make_pair(kc, vc);
}

absl::Status BindError(const ir::Op& op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("cuda executor: ", op.Summary(), ": ", why));
}

absl::StatusOr<OpShapes> ShapesAt(const ir::Op& op, int64_t bucket, WeightMode weights) {
  OpShapes s;
  s.bucket = bucket;
  ir::SymbolBindings b;
  auto bind = [&](const ir::Shape& sh) {
    for (const ir::Dim& d : sh.dims())
      if (d.IsSymbolic()) b[d.symbol()] = bucket;
  };
  for (unsigned i = 0; i < op.num_operands(); ++i) bind(op.operand(i)->shape());
  for (unsigned i = 0; i < op.num_results(); ++i) bind(op.result(i)->shape());
  auto concrete = [&](const ir::Shape& sh) -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> out;
    for (const ir::Dim& d : sh.dims()) {
      auto v = d.Evaluate(b);
      if (!v) return absl::InvalidArgumentError(absl::StrCat(op.Summary(), ": unbound dim ", d.ToString()));
      out.push_back(*v);
    }
    return out;
  };
  for (unsigned i = 0; i < op.num_operands(); ++i) {
    const ir::Value* v = op.operand(i);
    MEMRA_ASSIGN_OR_RETURN(auto sh, concrete(v->shape()));
    s.in.push_back(std::move(sh));
    const WeightLayout* layout = nullptr;
    if (ir::IsMatrixOperand(op, i)) {
      const std::string what =
          v->kind() == ir::Value::Kind::kWeight ? absl::StrCat("weight @", v->name()) : absl::StrCat("operand ", i);
      auto l = MatrixLayoutFor(v->dtype(), weights, what);
      if (!l.ok()) return absl::Status(l.status().code(), absl::StrCat(op.Summary(), ": ", l.status().message()));
      layout = *l;
    }
    s.in_layouts.push_back(layout);
    s.in_dtypes.push_back(layout != nullptr ? layout->compute_dtype : v->dtype());
  }
  for (unsigned i = 0; i < op.num_results(); ++i) {
    MEMRA_ASSIGN_OR_RETURN(auto sh, concrete(op.result(i)->shape()));
    s.out.push_back(std::move(sh));
  }
  return s;
}

// ---- the registry ----

const std::vector<const GpuOpImpl*>& GpuOpImpls() {
  static const auto* impls = [] {
    auto* v = new std::vector<const GpuOpImpl*>;
#define MEMRA_GPU_OP(F) v->push_back(Create##F().release());
#include "kernels/cuda/GpuOps.def"
    return v;
  }();
  return *impls;
}

const GpuOpImpl* FindGpuOpImpl(absl::string_view name) {
  for (const GpuOpImpl* u : GpuOpImpls())
    if (u->name() == name) return u;
  return nullptr;
}

absl::StatusOr<OpSelection> SelectGpuOp(const ir::Op& op, const OpShapes& shapes, const Target& target,
                                        const SelectOptions& options) {
  bool implemented = false;
  for (const GpuOpImpl* u : GpuOpImpls()) {
    if (!u->Implements(op.kind())) continue;
    implemented = true;
    MEMRA_ASSIGN_OR_RETURN(std::optional<OpSelection> s, u->Select({op, shapes, target, options}));
    if (s) {
      s->impl = std::string(u->name());
      return *std::move(s);
    }
  }
  if (implemented) return Unsupported(op, "no CUDA implementation applies to these shapes");
  return Unsupported(op, absl::StrCat("no CUDA kernel for ", op.mnemonic(), " yet",
                                      ir::InfoOf(op.kind()).HasFlag(ir::op_flags::kFused) ? " (run the unfused module)"
                                                                                          : " (use --backend cpu)"));
}

absl::Status CheckGpuUnitsImplement(const ir::Module& m) {
  for (const auto& fn : m.functions())
    for (const ir::Op* op : fn->Ops()) {
      if (op->is(ir::OpKind::kSegment)) continue;
      bool implemented = false;
      for (const GpuOpImpl* u : GpuOpImpls()) implemented |= u->Implements(op->kind());
      if (!implemented)
        return Unsupported(
            *op, absl::StrCat("in @", fn->name(), ": no CUDA kernel for ", op->mnemonic(), " yet (use --backend cpu)"));
    }
  return absl::OkStatus();
}

namespace {

// Sets `name` to `v` unless it already holds it; true when it changed.
bool SetAttr(ir::Op& op, absl::string_view name, ir::Attr v) {
  if (const ir::Attr* old = op.attrs().Get(name); old != nullptr && *old == v) return false;
  op.attrs().Set(name, std::move(v));
  return true;
}

}  // namespace

bool WriteSelection(const OpSelection& s, ir::Op& op) {
  const GpuOpImpl* u = FindGpuOpImpl(s.impl);
  if (u != nullptr && !u->DoesDeviceWork()) return false;
  bool changed = SetAttr(op, "impl", ir::Attr(s.impl));
  if (!s.launches.empty()) {
    std::vector<std::string> names;
    std::vector<int64_t> grid, block, smem, cluster;
    bool clustered = false;
    for (const Launch& l : s.launches) {
      names.push_back(l.kernel.ToString());
      grid.push_back(l.grid);
      block.push_back(l.block);
      smem.push_back(l.smem);
      cluster.push_back(l.cluster);
      clustered |= l.cluster > 1;
    }
    changed |= SetAttr(op, "kernels", ir::Attr(std::move(names)));
    changed |= SetAttr(op, "grid", ir::Attr(std::move(grid)));
    changed |= SetAttr(op, "block", ir::Attr(std::move(block)));
    changed |= SetAttr(op, "smem", ir::Attr(std::move(smem)));
    if (clustered) {
      changed |= SetAttr(op, "cluster", ir::Attr(std::move(cluster)));
    } else {
      changed |= op.attrs().Erase("cluster");
    }
  }
  // A field the selection does not set is erased: a re-selection (another option, a q8 companion
  // now sparing a launch and its scratch) must not leave an earlier record's value behind.
  auto set_or_erase = [&](const char* name, bool present, int64_t value) {
    if (present) {
      changed |= SetAttr(op, name, ir::Attr(value));
    } else {
      changed |= op.attrs().Erase(name);
    }
  };
  set_or_erase("gemm", s.gemm, 1);
  set_or_erase("gemv", s.gemv, 1);
  set_or_erase("scratch_bytes", s.scratch_bytes > 0, s.scratch_bytes);
  set_or_erase("workspace_bytes", s.workspace_bytes > 0, s.workspace_bytes);
  set_or_erase("ticket_words", s.ticket_words > 0, s.ticket_words);
  return changed;
}

absl::StatusOr<std::optional<OpSelection>> ReadSelection(const ir::Op& op) {
  const ir::AttrDict& at = op.attrs();
  const std::optional<std::string> impl = at.GetString("impl");
  if (!impl) return std::optional<OpSelection>();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(op.Summary(), ": kernel selection record: ", why));
  };
  if (FindGpuOpImpl(*impl) == nullptr) return bad(absl::StrCat("unknown implementation \"", *impl, "\""));
  OpSelection s;
  s.impl = *impl;
  const std::vector<std::string> names = at.GetStringArray("kernels").value_or(std::vector<std::string>{});
  const std::vector<int64_t> grid = at.GetI64Array("grid").value_or(std::vector<int64_t>{});
  const std::vector<int64_t> block = at.GetI64Array("block").value_or(std::vector<int64_t>{});
  const std::vector<int64_t> smem = at.GetI64Array("smem").value_or(std::vector<int64_t>{});
  const std::vector<int64_t> cluster =
      at.GetI64Array("cluster").value_or(std::vector<int64_t>(names.size(), int64_t{1}));
  if (grid.size() != names.size() || block.size() != names.size() || smem.size() != names.size() ||
      cluster.size() != names.size())
    return bad("kernels, grid, block, smem and cluster differ in length");
  for (size_t i = 0; i < names.size(); ++i) {
    Launch l;
    auto k = ParseKernelName(names[i]);
    if (!k.ok()) return bad(k.status().message());
    l.kernel = *std::move(k);
    if (grid[i] < 1 || grid[i] > 0x7fffffff || block[i] < 1 || block[i] > 1024 || smem[i] < 0 || smem[i] > (1 << 30))
      return bad(absl::StrCat("launch ", i, " has an impossible geometry"));
    if (cluster[i] < 1 || cluster[i] > 16 || grid[i] % cluster[i] != 0)
      return bad(absl::StrCat("launch ", i, " has a cluster size that does not divide its grid"));
    l.grid = static_cast<uint32_t>(grid[i]);
    l.block = static_cast<uint32_t>(block[i]);
    l.smem = static_cast<uint32_t>(smem[i]);
    l.cluster = static_cast<uint32_t>(cluster[i]);
    s.launches.push_back(std::move(l));
  }
  s.gemm = at.I64Or("gemm", 0) != 0;
  s.gemv = at.I64Or("gemv", 0) != 0;
  s.scratch_bytes = at.I64Or("scratch_bytes", 0);
  if (s.scratch_bytes < 0) return bad("negative scratch_bytes");
  s.workspace_bytes = at.I64Or("workspace_bytes", 0);
  if (s.workspace_bytes < 0) return bad("negative workspace_bytes");
  s.ticket_words = at.I64Or("ticket_words", 0);
  if (s.ticket_words < 0 || s.ticket_words > (int64_t{1} << 24)) return bad("ticket_words out of range");
  return std::optional<OpSelection>(std::move(s));
}

bool WriteSelectionTarget(const Target& t, ir::Module& m) {
  bool changed = false;
  if (m.attrs().GetString("kernel_arch") != t.ArchName()) {
    m.attrs().Set("kernel_arch", t.ArchName());
    changed = true;
  }
  if (m.attrs().GetI64("kernel_sm_count") != std::optional<int64_t>(t.sm_count)) {
    m.attrs().Set("kernel_sm_count", int64_t{t.sm_count});
    changed = true;
  }
  return changed;
}

absl::StatusOr<std::optional<Target>> ReadSelectionTarget(const ir::Module& m) {
  const std::optional<std::string> arch = m.attrs().GetString("kernel_arch");
  if (!arch) return std::optional<Target>();
  MEMRA_ASSIGN_OR_RETURN(Target t, TargetPreset(*arch));
  if (std::optional<int64_t> sms = m.attrs().GetI64("kernel_sm_count")) {
    if (*sms <= 0) return absl::InvalidArgumentError("module attribute kernel_sm_count must be positive");
    t.sm_count = static_cast<int>(*sms);
  }
  return std::optional<Target>(t);
}

namespace {

// A selection option as an integer module attribute, written only when not `dflt` (a flag: 1 when
// true, absent when false). True when the module changed.
bool WriteOptionAttr(absl::string_view attr, int64_t value, int64_t dflt, ir::Module& m) {
  if (value == dflt) return m.attrs().Erase(attr);
  if (m.attrs().GetI64(attr) == std::optional<int64_t>(value)) return false;
  m.attrs().Set(attr, value);
  return true;
}

// The attribute's value (`dflt` when absent) if `check` accepts it, else its error naming the
// attribute.
absl::StatusOr<int> ReadOptionAttr(const ir::Module& m, absl::string_view attr, int64_t dflt,
                                   absl::Status (*check)(int64_t)) {
  const int64_t v = m.attrs().I64Or(attr, dflt);
  if (absl::Status st = check(v); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat("module attribute ", attr, ": ", st.message()));
  return static_cast<int>(v);
}

// A value in [0, 65536] for the option `name`.
absl::Status CheckBytesRange(absl::string_view name, int64_t v) {
  if (v >= 0 && v <= 65536) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " is 0..65536, not ", v));
}

}  // namespace

bool WriteLastBlockMerge(bool merge, ir::Module& m) {
  return WriteOptionAttr("kernel_last_block_merge", merge ? 1 : 0, 0, m);
}

bool ReadLastBlockMerge(const ir::Module& m) { return m.attrs().I64Or("kernel_last_block_merge", 0) != 0; }

bool WriteDeltaStepSplit(int split, ir::Module& m) {
  return WriteOptionAttr("kernel_delta_step_split", split, SelectOptions{}.delta_step_split, m);
}

absl::Status CheckDeltaStepSplit(int64_t split) {
  if (split == 1 || split == 2 || split == 4 || split == 8) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("delta-step-split is 1, 2, 4 or 8, not ", split));
}

absl::StatusOr<int> ReadDeltaStepSplit(const ir::Module& m) {
  return ReadOptionAttr(m, "kernel_delta_step_split", SelectOptions{}.delta_step_split, &CheckDeltaStepSplit);
}

absl::Status CheckGemvWarpBytes(int64_t bytes) { return CheckBytesRange("gemv-warp-bytes", bytes); }

bool WriteGemvWarpBytes(int bytes, ir::Module& m) {
  return WriteOptionAttr("kernel_gemv_warp_bytes", bytes, SelectOptions{}.gemv_warp_bytes, m);
}

absl::StatusOr<int> ReadGemvWarpBytes(const ir::Module& m) {
  return ReadOptionAttr(m, "kernel_gemv_warp_bytes", SelectOptions{}.gemv_warp_bytes, &CheckGemvWarpBytes);
}

absl::Status CheckGemvSplitKMaxK(int64_t k) { return CheckBytesRange("gemv-splitk-max-k", k); }

bool WriteGemvSplitKMaxK(int k, ir::Module& m) {
  return WriteOptionAttr("kernel_gemv_splitk_max_k", k, SelectOptions{}.gemv_splitk_max_k, m);
}

absl::StatusOr<int> ReadGemvSplitKMaxK(const ir::Module& m) {
  return ReadOptionAttr(m, "kernel_gemv_splitk_max_k", SelectOptions{}.gemv_splitk_max_k, &CheckGemvSplitKMaxK);
}

absl::Status CheckL2PrefetchBytes(int64_t bytes) {
  if (bytes >= 0 && bytes <= kMaxL2PrefetchBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("l2-prefetch-bytes is 0..", kMaxL2PrefetchBytes, ", not ", bytes));
}

bool WriteL2PrefetchBytes(int bytes, ir::Module& m) {
  return WriteOptionAttr("kernel_l2_prefetch_bytes", bytes, SelectOptions{}.l2_prefetch_bytes, m);
}

absl::StatusOr<int> ReadL2PrefetchBytes(const ir::Module& m) {
  return ReadOptionAttr(m, "kernel_l2_prefetch_bytes", SelectOptions{}.l2_prefetch_bytes, &CheckL2PrefetchBytes);
}

absl::Status CheckGemvQBlocksPerSm(int64_t blocks) {
  if (blocks >= 0 && blocks <= kMaxGemvQBlocksPerSm) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("gemv-q-blocks-per-sm is 0..", kMaxGemvQBlocksPerSm, ", not ", blocks));
}

bool WriteGemvQBlocksPerSm(int blocks, ir::Module& m) {
  return WriteOptionAttr("kernel_gemv_q_blocks_per_sm", blocks, SelectOptions{}.gemv_q_blocks_per_sm, m);
}

absl::StatusOr<int> ReadGemvQBlocksPerSm(const ir::Module& m) {
  return ReadOptionAttr(m, "kernel_gemv_q_blocks_per_sm", SelectOptions{}.gemv_q_blocks_per_sm, &CheckGemvQBlocksPerSm);
}

namespace {

// The boolean options besides the last-block merge: each its attribute, written as 1 / 0 only when
// it differs from SelectOptions{}'s value (absent reads as that value).
struct BoolOption {
  const char* attr;
  bool SelectOptions::*field;
};
constexpr BoolOption kBoolOptions[] = {
    {"kernel_combine_early_loads", &SelectOptions::combine_early_loads},  // {combine-early-loads}, true
    {"kernel_gemv_evict_first", &SelectOptions::gemv_evict_first},        // {gemv-evict-first}
    {"kernel_step_early_loads", &SelectOptions::step_early_loads},        // {step-early-loads}
    {"kernel_gemv_q_x_early", &SelectOptions::gemv_q_x_early},            // {gemv-q-x-early}
    {"kernel_gemv_q_pair_dot", &SelectOptions::gemv_q_pair_dot},          // {gemv-q-pair-dot}, true
};

}  // namespace

bool WriteSelectOptions(const SelectOptions& o, ir::Module& m) {
  bool changed = WriteLastBlockMerge(o.last_block_merge, m);
  changed |= WriteDeltaStepSplit(o.delta_step_split, m);
  changed |= WriteGemvWarpBytes(o.gemv_warp_bytes, m);
  changed |= WriteGemvSplitKMaxK(o.gemv_splitk_max_k, m);
  changed |= WriteL2PrefetchBytes(o.l2_prefetch_bytes, m);
  changed |= WriteGemvQBlocksPerSm(o.gemv_q_blocks_per_sm, m);
  for (const BoolOption& b : kBoolOptions)
    changed |= WriteOptionAttr(b.attr, o.*b.field ? 1 : 0, SelectOptions{}.*b.field ? 1 : 0, m);
  return changed;
}

absl::StatusOr<SelectOptions> ReadSelectOptions(const ir::Module& m) {
  SelectOptions o;
  MEMRA_ASSIGN_OR_RETURN(o.decode_class, ReadDecodeClass(m));
  o.last_block_merge = ReadLastBlockMerge(m);
  MEMRA_ASSIGN_OR_RETURN(o.delta_step_split, ReadDeltaStepSplit(m));
  MEMRA_ASSIGN_OR_RETURN(o.gemv_warp_bytes, ReadGemvWarpBytes(m));
  MEMRA_ASSIGN_OR_RETURN(o.gemv_splitk_max_k, ReadGemvSplitKMaxK(m));
  MEMRA_ASSIGN_OR_RETURN(o.l2_prefetch_bytes, ReadL2PrefetchBytes(m));
  MEMRA_ASSIGN_OR_RETURN(o.gemv_q_blocks_per_sm, ReadGemvQBlocksPerSm(m));
  for (const BoolOption& b : kBoolOptions) o.*b.field = m.attrs().I64Or(b.attr, SelectOptions{}.*b.field ? 1 : 0) != 0;
  return o;
}

bool WriteSelectionWeights(WeightMode mode, ir::Module& m) {
  const std::string name(WeightModeName(mode));
  if (m.attrs().GetString("kernel_weights") == name) return false;
  m.attrs().Set("kernel_weights", name);
  return true;
}

absl::StatusOr<std::optional<WeightMode>> ReadSelectionWeights(const ir::Module& m) {
  const std::optional<std::string> w = m.attrs().GetString("kernel_weights");
  if (!w) {
    // Selected before the attribute existed: every block format was a bf16 copy then.
    if (m.attrs().Has("kernel_arch")) return std::optional<WeightMode>(WeightMode::kBf16);
    return std::optional<WeightMode>();
  }
  auto mode = ParseWeightMode(*w);
  if (!mode.ok())
    return absl::InvalidArgumentError(absl::StrCat("module attribute kernel_weights: ", mode.status().message()));
  return std::optional<WeightMode>(*mode);
}

bool IsStaticFunction(const ir::Function& fn) {
  for (unsigned i = 0; i < fn.num_arguments(); ++i)
    if (!fn.argument(i)->shape().IsStatic()) return false;
  for (const ir::Op* op : fn.Ops())
    for (const ir::Value* r : op->results())
      if (!r->shape().IsStatic()) return false;
  return true;
}

absl::StatusOr<std::vector<OpSelection>> SelectionsOf(const ir::Function& fn, int64_t bucket, const Target& target,
                                                      WeightMode weights, bool use_records) {
  SelectOptions options;
  if (fn.module() != nullptr) {
    MEMRA_ASSIGN_OR_RETURN(options, ReadSelectOptions(*fn.module()));
  }
  std::vector<OpSelection> out;
  for (const ir::Op* op : fn.Ops()) {
    if (op->is(ir::OpKind::kSegment)) continue;
    if (use_records) {
      MEMRA_ASSIGN_OR_RETURN(std::optional<OpSelection> rec, ReadSelection(*op));
      if (rec) {
        out.push_back(*std::move(rec));
        continue;
      }
    }
    MEMRA_ASSIGN_OR_RETURN(OpShapes s, ShapesAt(*op, bucket, weights));
    MEMRA_ASSIGN_OR_RETURN(OpSelection sel, SelectGpuOp(*op, s, target, options));
    if (use_records && FindGpuOpImpl(sel.impl)->DoesDeviceWork())
      return absl::FailedPreconditionError(absl::StrCat("@", fn.name(), ": ", op->Summary(),
                                                        " has no kernel selection record (impl = ...) although its "
                                                        "function was selected: the module is stale; recompile it"));
    out.push_back(std::move(sel));
  }
  return out;
}

absl::StatusOr<int64_t> WorkspaceBytesOf(const ir::Module& m, const Target& target, WeightMode weights,
                                         bool use_records) {
  MEMRA_ASSIGN_OR_RETURN(const SelectOptions options, ReadSelectOptions(m));
  int64_t most = 0;
  for (const auto& f : m.functions()) {
    const bool fixed = IsStaticFunction(*f);
    const std::vector<int64_t> buckets =
        fixed ? std::vector<int64_t>{f->attrs().I64Or("bucket", 1)} : std::vector<int64_t>{1, 16};
    for (const ir::Op* op : f->Ops()) {
      if (op->is(ir::OpKind::kSegment)) continue;
      if (use_records && fixed) {
        MEMRA_ASSIGN_OR_RETURN(std::optional<OpSelection> rec, ReadSelection(*op));
        if (rec) {
          most = std::max(most, rec->workspace_bytes);
          continue;
        }
      }
      for (int64_t b : buckets) {
        MEMRA_ASSIGN_OR_RETURN(OpShapes s, ShapesAt(*op, b, weights));
        // An op no unit takes asks for nothing here; its program fails when it is built.
        auto sel = SelectGpuOp(*op, s, target, options);
        if (sel.ok()) most = std::max(most, sel->workspace_bytes);
      }
    }
  }
  return most;
}

}  // namespace memra::kernels::cuda
