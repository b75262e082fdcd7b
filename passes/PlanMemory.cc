// plan-memory: static arena offsets for every function with static shapes (see
// passes/MemoryPlan.h for the layout and how it is recorded). Functions with symbolic shapes
// are skipped (statistic skipped-symbolic): run bucket-shapes first. Statistics sum over the
// planned functions: arena-bytes (peaks) vs naive-bytes (one allocation per buffer).
// Options: alignment (bytes, a power of two; default 256).
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/Module.h"
#include "ir/ResultBuffer.h"
#include "ir/StatusMacros.h"
#include "passes/FunctionPass.h"
#include "passes/MemoryPlan.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {

int64_t ElementBytes(ir::DType dtype) {
  const ir::DTypeInfo& info = ir::InfoOf(dtype);
  return info.block_elems == 1 ? info.block_bytes : 4;
}

std::optional<std::vector<int64_t>> SliceViewOffsets(const ir::Op& op, int64_t alignment) {
  if (!op.is(ir::OpKind::kSplit) && !op.is(ir::OpKind::kView)) return std::nullopt;
  if (op.num_operands() < 1 || alignment <= 0) return std::nullopt;
  const ir::Value* x = op.operand(0);
  const ir::Shape& shape = x->shape();
  if (!shape.IsStatic() || x->dtype() != ir::DType::kF32) return std::nullopt;
  const int64_t rank = shape.rank();
  int64_t axis = op.attrs().I64Or("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  int64_t inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t n = shape[d].value();
    if (d < axis && n != 1) return std::nullopt;  // slices would be strided
    if (d > axis) inner *= n;
  }
  const bool split = op.is(ir::OpKind::kSplit);
  const std::vector<int64_t> sizes = split ? op.attrs().GetI64Array("sizes").value_or(std::vector<int64_t>{})
                                           : std::vector<int64_t>{op.attrs().I64Or("size", 0)};
  if (sizes.size() != op.num_results()) return std::nullopt;
  int64_t off = split ? 0 : op.attrs().I64Or("offset", 0);
  std::vector<int64_t> bytes;
  for (int64_t sz : sizes) {
    const int64_t b = off * inner * ElementBytes(x->dtype());
    if (b % alignment != 0) return std::nullopt;
    bytes.push_back(b);
    off += sz;
  }
  return bytes;
}

namespace {

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Lifetimes of the function's values; offsets left 0.
absl::StatusOr<ArenaPlan> Liveness(const ir::Function& f, int64_t alignment) {
  ArenaPlan plan;
  plan.alignment = alignment;
  absl::flat_hash_map<const ir::Value*, size_t> index;
  auto add = [&](const ir::Value* v, int64_t step, const ir::Value* alias_of, int64_t alias_offset) -> absl::Status {
    std::optional<int64_t> n = v->shape().NumElements();
    if (!n)
      return absl::FailedPreconditionError(absl::StrCat("plan-memory: @", f.name(), ": %", v->name(), " has type ",
                                                        v->type().ToString(), " (symbolic; run bucket-shapes first)"));
    ArenaBuffer b;
    b.value = v;
    b.first = b.last = step;
    b.alias_of = alias_of;
    b.alias_offset = alias_offset;
    const int64_t value_bytes = std::max<int64_t>(*n * ElementBytes(v->dtype()), 1);
    const int64_t bytes = v->def() != nullptr ? ir::ResultBufferBytes(*v->def(), v->index(), value_bytes) : value_bytes;
    b.bytes = alias_of ? 0 : AlignUp(bytes, alignment);
    index[v] = plan.buffers.size();
    plan.buffers.push_back(b);
    return absl::OkStatus();
  };
  for (unsigned i = 0; i < f.num_arguments(); ++i) MEMRA_RETURN_IF_ERROR(add(f.argument(i), -1, nullptr, 0));
  auto root = [&](const ir::Value* v) {
    const ArenaBuffer& b = plan.buffers[index.at(v)];
    return b.alias_of ? b.alias_of : v;
  };
  std::vector<ir::Op*> ops = f.Ops();
  const int64_t end = static_cast<int64_t>(ops.size());
  for (int64_t step = 0; step < end; ++step) {
    const ir::Op* op = ops[step];
    for (const ir::Value* v : op->operands()) {
      if (v == nullptr || v->is_global()) continue;
      auto it = index.find(v);
      if (it == index.end()) continue;  // the verifier reports undefined values
      ArenaBuffer& rb = plan.buffers[index.at(root(v))];
      rb.last = std::max(rb.last, op->is(ir::OpKind::kReturn) ? end : step);
    }
    const bool in_arena = op->num_operands() > 0 && index.contains(op->operand(0));
    std::optional<std::vector<int64_t>> slices;
    if (in_arena) slices = SliceViewOffsets(*op, alignment);
    for (unsigned i = 0; i < op->num_results(); ++i) {
      const ir::Value* alias = nullptr;
      int64_t alias_offset = 0;
      if (in_arena && (op->is(ir::OpKind::kReshape) || slices)) {
        alias = root(op->operand(0));
        alias_offset = plan.buffers[index.at(op->operand(0))].alias_offset + (slices ? (*slices)[i] : 0);
      }
      MEMRA_RETURN_IF_ERROR(add(op->result(i), step, alias, alias_offset));
    }
    if (int64_t n = op->attrs().I64Or("scratch_bytes", 0); n > 0) {
      ArenaBuffer b;
      b.scratch_of = op;
      b.first = b.last = step;
      b.bytes = AlignUp(n, alignment);
      plan.buffers.push_back(b);
    }
  }
  // Aliases share their root's lifetime.
  for (ArenaBuffer& b : plan.buffers)
    if (b.alias_of) {
      const ArenaBuffer& rb = plan.buffers[index.at(b.alias_of)];
      b.first = rb.first;
      b.last = rb.last;
    }
  for (const ArenaBuffer& b : plan.buffers) plan.naive_bytes += b.bytes;
  return plan;
}

bool Overlap(const ArenaBuffer& a, const ArenaBuffer& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

absl::StatusOr<ArenaPlan> ComputeArenaPlan(const ir::Function& f, int64_t alignment) {
  MEMRA_ASSIGN_OR_RETURN(ArenaPlan plan, Liveness(f, alignment));
  std::vector<size_t> order;
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (!plan.buffers[i].alias_of) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (plan.buffers[a].bytes != plan.buffers[b].bytes) return plan.buffers[a].bytes > plan.buffers[b].bytes;
    return plan.buffers[a].first < plan.buffers[b].first;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    ArenaBuffer& b = plan.buffers[i];
    std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of live-overlapping buffers
    for (size_t j : placed)
      if (Overlap(b, plan.buffers[j]))
        busy.emplace_back(plan.buffers[j].offset, plan.buffers[j].offset + plan.buffers[j].bytes);
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [s, e] : busy) {
      if (off + b.bytes <= s) break;
      off = std::max(off, AlignUp(e, alignment));
    }
    b.offset = off;
    plan.arena_bytes = std::max(plan.arena_bytes, off + b.bytes);
    placed.push_back(i);
  }
  absl::flat_hash_map<const ir::Value*, int64_t> offset;
  for (const ArenaBuffer& b : plan.buffers)
    if (!b.alias_of && b.value) offset[b.value] = b.offset;
  for (ArenaBuffer& b : plan.buffers)
    if (b.alias_of) b.offset = offset.at(b.alias_of) + b.alias_offset;
  return plan;
}

absl::StatusOr<std::optional<ArenaPlan>> ReadArenaPlan(const ir::Function& f) {
  std::optional<int64_t> bytes = f.attrs().GetI64("arena_bytes");
  if (!bytes) return std::optional<ArenaPlan>();
  const int64_t align = f.attrs().I64Or("arena_align", 1);
  MEMRA_ASSIGN_OR_RETURN(ArenaPlan plan, Liveness(f, align));
  plan.arena_bytes = *bytes;
  auto err = [&](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat("arena plan of @", f.name(), ": ", msg));
  };
  absl::flat_hash_map<const ir::Value*, int64_t> offsets;
  std::vector<int64_t> args = f.attrs().GetI64Array("arena_args").value_or(std::vector<int64_t>{});
  if (args.size() != f.num_arguments()) return err("arena_args does not give one offset per argument");
  for (unsigned i = 0; i < f.num_arguments(); ++i) offsets[f.argument(i)] = args[i];
  for (const ir::Op* op : f.Ops()) {
    if (op->num_results() == 0) continue;
    std::vector<int64_t> offs = op->attrs().GetI64Array("arena").value_or(std::vector<int64_t>{});
    if (offs.size() != op->num_results())
      return err(absl::StrCat(op->Summary(), ": 'arena' does not give one offset per result"));
    for (unsigned i = 0; i < op->num_results(); ++i) offsets[op->result(i)] = offs[i];
  }
  for (ArenaBuffer& b : plan.buffers) {
    if (b.scratch_of) {
      std::optional<int64_t> off = b.scratch_of->attrs().GetI64("scratch");
      if (!off) return err(absl::StrCat(b.scratch_of->Summary(), ": 'scratch_bytes' without a 'scratch' offset"));
      b.offset = *off;
    } else {
      b.offset = offsets.at(b.value);
    }
  }
  return std::optional<ArenaPlan>(std::move(plan));
}

absl::Status CheckArenaPlan(const ArenaPlan& plan) {
  auto name = [](const ArenaBuffer& b) {
    if (b.scratch_of) return absl::StrCat("the scratch of ", b.scratch_of->Summary());
    return absl::StrCat("%", b.value->name().empty() ? "?" : b.value->name());
  };
  absl::flat_hash_map<const ir::Value*, int64_t> root_offset;
  for (const ArenaBuffer& b : plan.buffers)
    if (!b.alias_of && b.value) root_offset[b.value] = b.offset;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const ArenaBuffer& a = plan.buffers[i];
    if (a.alias_of) {
      if (root_offset.at(a.alias_of) + a.alias_offset != a.offset)
        return absl::InvalidArgumentError(
            absl::StrCat("arena: alias ", name(a), " is not at its root's offset + ", a.alias_offset));
      continue;
    }
    if (a.offset < 0 || a.offset + a.bytes > plan.arena_bytes || a.offset % plan.alignment != 0)
      return absl::InvalidArgumentError(absl::StrCat("arena: ", name(a), " at [", a.offset, ", ", a.offset + a.bytes,
                                                     ") is outside the arena of ", plan.arena_bytes,
                                                     " bytes or not aligned to ", plan.alignment));
    for (size_t j = i + 1; j < plan.buffers.size(); ++j) {
      const ArenaBuffer& b = plan.buffers[j];
      if (b.alias_of || !Overlap(a, b)) continue;
      if (a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes)
        return absl::InvalidArgumentError(absl::StrCat("arena: ", name(a), " [", a.offset, ", ", a.offset + a.bytes,
                                                       ") and ", name(b), " [", b.offset, ", ", b.offset + b.bytes,
                                                       ") overlap while both are live (steps ", a.first, "..", a.last,
                                                       " and ", b.first, "..", b.last, ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

class PlanMemoryPass : public FunctionPass {
 public:
  absl::string_view name() const override { return "plan-memory"; }
  absl::string_view description() const override {
    return "Assigns every activation a static offset in one arena per function (liveness-based reuse)";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    const int64_t align = *alignment_;
    if (align <= 0 || (align & (align - 1)) != 0)
      return absl::InvalidArgumentError(absl::StrCat("plan-memory: alignment ", align, " is not a power of two"));
    return RunOnFunctions(m);
  }

  // Static functions only (the symbolic ones are counted).
  bool ShouldRunOn(const ir::Function& f) override {
    bool is_static = true;
    for (unsigned i = 0; i < f.num_arguments(); ++i) is_static &= f.argument(i)->shape().IsStatic();
    for (const ir::Op* op : f.Ops())
      for (const ir::Value* r : op->results()) is_static &= r->shape().IsStatic();
    if (!is_static) ++skipped_;
    return is_static;
  }

  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override {
    const int64_t align = *alignment_;
    bool changed = false;
    MEMRA_ASSIGN_OR_RETURN(ArenaPlan plan, ComputeArenaPlan(f, align));
    MEMRA_RETURN_IF_ERROR(CheckArenaPlan(plan));
    absl::flat_hash_map<const ir::Value*, int64_t> offset;
    for (const ArenaBuffer& b : plan.buffers)
      if (b.value) offset[b.value] = b.offset;
    auto set = [&](ir::AttrDict& attrs, absl::string_view key, ir::Attr v) {
      const ir::Attr* old = attrs.Get(key);
      if (old && *old == v) return;
      attrs.Set(key, std::move(v));
      changed = true;
    };
    std::vector<int64_t> args;
    for (unsigned i = 0; i < f.num_arguments(); ++i) args.push_back(offset.at(f.argument(i)));
    set(f.attrs(), "arena_args", args);
    set(f.attrs(), "arena_bytes", plan.arena_bytes);
    set(f.attrs(), "arena_naive_bytes", plan.naive_bytes);
    set(f.attrs(), "arena_align", align);
    for (ir::Op* op : f.Ops()) {
      if (op->num_results() == 0) continue;
      std::vector<int64_t> offs;
      for (const ir::Value* r : op->results()) offs.push_back(offset.at(r));
      set(op->attrs(), "arena", offs);
    }
    for (const ArenaBuffer& b : plan.buffers)
      if (b.scratch_of) {
        set(const_cast<ir::Op*>(b.scratch_of)->attrs(), "scratch", b.offset);
        ++scratch_;
      }
    ++functions_;
    arena_bytes_ += plan.arena_bytes;
    naive_bytes_ += plan.naive_bytes;
    for (const ArenaBuffer& b : plan.buffers)
      if (b.value) ++(b.alias_of ? aliases_ : buffers_);
    return changed;
  }

 private:
  Option<int64_t> alignment_{this, "alignment", "byte alignment of every buffer (a power of two)", 256, 1, 1 << 20};
  Statistic functions_{this, "functions", "functions planned"};
  Statistic buffers_{this, "buffers", "buffers placed"};
  Statistic aliases_{this, "aliases", "reshape and slice results aliasing their input"};
  Statistic arena_bytes_{this, "arena-bytes", "sum over functions of the arena size (peak)"};
  Statistic naive_bytes_{this, "naive-bytes", "sum over functions of all buffer sizes (no reuse)"};
  Statistic skipped_{this, "skipped-symbolic", "functions with symbolic shapes (not planned)"};
  Statistic scratch_{this, "scratch", "per-op scratch buffers (scratch_bytes) placed"};
};

}  // namespace

std::unique_ptr<Pass> CreatePlanMemoryPass() { return std::make_unique<PlanMemoryPass>(); }

}  // namespace memra::passes
