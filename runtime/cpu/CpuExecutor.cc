#include "runtime/cpu/CpuExecutor.h"

#include "runtime/KvCapacity.h"
#include "runtime/StateMemory.h"

#include "runtime/ArgumentBinding.h"
#include "runtime/Communicator.h"
#include "runtime/WeightShard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Function.h"
#include "ir/StatusMacros.h"
#include "kernels/cpu/Attention.h"
#include "kernels/cpu/DeltaNet.h"
#include "kernels/cpu/Elementwise.h"
#include "kernels/cpu/FusedRows.h"
#include "kernels/cpu/Matmul.h"
#include "kernels/cpu/Moe.h"
#include "kernels/cpu/Norm.h"
#include "kernels/cpu/Rope.h"
#include "kernels/cpu/Sampling.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"

namespace memra::runtime {

namespace kc = memra::kernels::cpu;
using ir::DType;
using ir::Op;
using ir::OpKind;

struct CpuExecutor::BoundWeight {
  const ir::Weight* weight = nullptr;
  kc::WeightView view;                   // matrix consumers (matmul, embed)
  std::optional<kc::DenseWeight> dense;  // dequantize-at-load copy of the matrix
  const float* values = nullptr;         // f32 values for element consumers (norms, conv, biases)
  std::vector<float> decoded_values;     // owned when the stored type is not f32
  std::vector<uint8_t> shard_bytes;      // this rank's slice of a sharded weight (runtime/WeightShard.h)
};

namespace {

// A KV cache state as the attention kernels take it (f32, f16, bf16 elements or q8_0 blocks).
kc::KvRows KvOf(HostTensor& t) {
  const formats::GgmlType type = t.dtype() == DType::kF16    ? formats::GgmlType::kF16
                                 : t.dtype() == DType::kBF16 ? formats::GgmlType::kBF16
                                 : t.dtype() == DType::kQ8_0 ? formats::GgmlType::kQ8_0
                                                             : formats::GgmlType::kF32;
  return {t.mutable_data(), type};
}
kc::ConstKvRows KvOf(const HostTensor& t) { return KvOf(const_cast<HostTensor&>(t)); }

struct Operand {
  enum Kind : uint8_t { kSlot, kWeight, kState } kind = kSlot;
  int slot = -1;
  CpuExecutor::BoundWeight* weight = nullptr;
  const ir::Value* state = nullptr;
};

struct Step {
  const Op* op = nullptr;
  llvm::SmallVector<Operand, 6> in;
  llvm::SmallVector<int, 2> out;
  llvm::SmallVector<int64_t, 2> out_offsets;  // memory plan offsets of the results (arena mode)
  llvm::SmallVector<int, 4> release;          // slots whose last use is this step
};

absl::Status OpError(const Op& op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("cpu executor: ", op.Summary(), ": ", msg));
}

}  // namespace

struct CpuExecutor::Program {
  const ir::Function* fn = nullptr;
  int num_slots = 0;
  std::vector<int> arg_slots;
  std::vector<Step> steps;
  std::vector<const Op*> kv_appends;
  // Memory plan (plan-memory): arena size (-1: none), argument offsets; the arena is allocated
  // on the first call.
  int64_t arena_bytes = -1;
  std::vector<int64_t> arg_offsets;
  mutable std::shared_ptr<std::vector<uint64_t>> arena;
};

CpuExecutor::CpuExecutor(const ir::Module& module, const gguf::GgufFile& file, CpuExecutorOptions options)
    : module_(module), file_(file), options_(options) {}

CpuExecutor::~CpuExecutor() = default;

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(const ir::Module& module, const gguf::GgufFile& file,
                                                                 const CpuExecutorOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t tp = module.attrs().I64Or("tp", 1);
  const int ranks = options.communicator ? options.communicator->size() : 1;
  if (tp != ranks)
    return absl::InvalidArgumentError(absl::StrCat(
        "the module is partitioned for ", tp, " tensor-parallel ranks (its tp attribute); this executor ",
        options.communicator ? absl::StrCat("is one rank of ", ranks) : std::string("has no group of ranks")));
  std::unique_ptr<CpuExecutor> e(new CpuExecutor(module, file, options));
  e->pool_ = std::make_unique<kc::ThreadPool>(options.threads);
  MEMRA_RETURN_IF_ERROR(e->BindWeights());
  MEMRA_RETURN_IF_ERROR(e->AllocateState());
  for (const auto& fn : module.functions()) MEMRA_RETURN_IF_ERROR(e->Prepare(fn->name()).status());
  e->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

int CpuExecutor::num_threads() const { return pool_->num_threads(); }

absl::Status CpuExecutor::BindWeights() {
  for (const auto& wp : module_.weights()) {
    const ir::Weight* w = wp.get();
    const gguf::TensorInfo* t = file_.FindTensor(w->name());
    if (t == nullptr)
      return absl::NotFoundError(
          absl::StrCat(file_.path(), ": tensor \"", w->name(), "\" (a weight of the module) not found"));
    auto b = std::make_unique<BoundWeight>();
    gguf::TensorInfo local;  // this rank's slice, when the weight is sharded
    MEMRA_ASSIGN_OR_RETURN(std::optional<WeightShard> shard, ShardOf(*w));
    if (shard) {
      const int rank = options_.communicator ? options_.communicator->rank() : 0;
      const int tp = options_.communicator ? options_.communicator->size() : 1;
      MEMRA_ASSIGN_OR_RETURN(TensorSlice slice, SliceTensor(*t, *shard, rank, tp));
      b->shard_bytes = std::move(slice.bytes);
      local = *t;
      local.ne = std::move(slice.ne);
      local.nbytes = b->shard_bytes.size();
      local.data = absl::MakeConstSpan(b->shard_bytes);
      t = &local;
    }
    if (!w->shape().IsStatic())
      return absl::InvalidArgumentError(absl::StrCat("weight @", w->name(), " has a symbolic shape"));
    std::vector<int64_t> ne;
    for (int64_t i = w->rank() - 1; i >= 0; --i) ne.push_back(w->shape()[i].value());
    std::vector<int64_t> got = t->ne, want = ne;  // trailing 1s are not shape: {n} is {n, 1}
    while (got.size() > 1 && got.back() == 1) got.pop_back();
    while (want.size() > 1 && want.back() == 1) want.pop_back();
    if (got != want)
      return absl::InvalidArgumentError(absl::StrCat(file_.path(), ": tensor \"", w->name(), "\" has shape ",
                                                     gguf::ShapeString(t->ne), ", the module declares ",
                                                     gguf::ShapeString(ne)));
    if (ir::InfoOf(w->dtype()).ggml_id != static_cast<int>(t->type))
      return absl::InvalidArgumentError(absl::StrCat(file_.path(), ": tensor \"", w->name(), "\" has type ",
                                                     formats::GgmlTypeName(t->type), ", the module declares ",
                                                     ir::DTypeName(w->dtype())));
    if (!kc::CanDecode(t->type))
      return absl::UnimplementedError(absl::StrCat(file_.path(), ": tensor \"", w->name(),
                                                   "\": no CPU dequantizer for ", formats::GgmlTypeName(t->type),
                                                   " yet"));
    bool matrix_use = false, value_use = false;
    for (const ir::Use& u : w->uses()) {
      if (ir::IsMatrixOperand(*u.user, u.operand_index))
        matrix_use = true;
      else
        value_use = true;
    }
    b->weight = w;
    const int64_t n = t->NumElements();
    if (matrix_use) {
      // A 3-D matrix (experts [E, N, K]) is one view of E*N rows, read per row like any other.
      if (ne.size() != 2 && ne.size() != 3)
        return absl::InvalidArgumentError(
            absl::StrCat("weight @", w->name(), " used as a matrix has rank ", ne.size()));
      if (ne.size() == 3) {
        MEMRA_ASSIGN_OR_RETURN(b->view, kc::WeightView::FromStack(t->name, t->type, ne, t->data));
      } else {
        MEMRA_ASSIGN_OR_RETURN(b->view, kc::WeightView::FromTensor(t->name, t->type, t->ne, t->data));
      }
      if (options_.weight_mode == WeightMode::kDequantizeAtLoad && t->type != formats::GgmlType::kF32) {
        MEMRA_ASSIGN_OR_RETURN(kc::DenseWeight d, kc::DenseWeight::FromView(b->view));
        b->dense = std::move(d);
        b->view = b->dense->view();
        dense_bytes_ += static_cast<uint64_t>(n) * sizeof(float);
      }
    }
    if (value_use) {
      if (t->type == formats::GgmlType::kF32 && reinterpret_cast<uintptr_t>(t->data.data()) % alignof(float) == 0) {
        b->values = reinterpret_cast<const float*>(t->data.data());
      } else {
        MEMRA_ASSIGN_OR_RETURN(kc::WeightView flat, kc::WeightView::Make(t->type, 1, n, t->data));
        MEMRA_ASSIGN_OR_RETURN(kc::DenseWeight d, kc::DenseWeight::FromView(flat));
        b->decoded_values = d.values();
        b->values = b->decoded_values.data();
        dense_bytes_ += static_cast<uint64_t>(n) * sizeof(float);
      }
    }
    weights_[w] = std::move(b);
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::AllocateState() {
  // Refuse an impossible context before allocating any of it.
  MEMRA_ASSIGN_OR_RETURN(const StateBytes need, StateBytesOf(module_));
  const uint64_t available = AvailableHostMemory();
  const bool capped = options_.memory_budget > 0 && options_.memory_budget < available;
  MEMRA_RETURN_IF_ERROR(CheckStateFits(need, capped ? options_.memory_budget : available,
                                       capped ? "host memory (--max-host-memory)" : "host memory"));
  for (const auto& sp : module_.states()) {
    const ir::StateVar* s = sp.get();
    if (!s->shape().IsStatic())
      return absl::InvalidArgumentError(absl::StrCat("state @", s->name(), " has a symbolic shape"));
    llvm::SmallVector<int64_t, 4> shape;
    for (const ir::Dim& d : s->shape().dims()) shape.push_back(d.value());
    MEMRA_RETURN_IF_ERROR(StateStorageBytes(*s, "CPU").status());
    state_[s] = HostTensor::Zeros(s->dtype(), shape);
    if (s->state_kind() == ir::StateKind::kPosition && (position_state_ == nullptr || s->name() == "pos"))
      position_state_ = s;
  }
  kv_capacity_ = KvContextCapacity(module_);
  return absl::OkStatus();
}

void CpuExecutor::ResetState() {
  // Zero bits are zero in every state type (f32, f16, bf16, i32, i64).
  for (auto& [s, t] : state_) std::memset(t.mutable_data(), 0, static_cast<size_t>(t.nbytes()));
}

int64_t CpuExecutor::position() const {
  if (position_state_ == nullptr) return 0;
  return state_.at(position_state_).i32()[0];
}

absl::Status CpuExecutor::WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes) {
  const ir::StateVar* s = module_.state(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("cpu executor: no state @", name));
  HostTensor& t = state_.at(s);
  if (offset < 0 || bytes < 0 || offset + bytes > t.nbytes())
    return absl::OutOfRangeError(absl::StrCat("cpu executor: write of ", bytes, " bytes at ", offset, " into state @",
                                              name, " of ", t.nbytes(), " bytes"));
  // The state's own storage (HostTensor hands out typed mutable pointers only).
  char* dst = (t.dtype() == DType::kF32   ? reinterpret_cast<char*>(t.f32())
               : t.dtype() == DType::kI32 ? reinterpret_cast<char*>(t.i32())
                                          : reinterpret_cast<char*>(t.i64())) +
              offset;
  if (data)
    std::memcpy(dst, data, static_cast<size_t>(bytes));
  else
    std::memset(dst, 0, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status CpuExecutor::AllocateStash(int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("cpu executor: a stash of ", bytes, " bytes"));
  stash_.assign(static_cast<size_t>(bytes), 0);
  return absl::OkStatus();
}

absl::Status CpuExecutor::CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                                    bool to_stash) {
  const ir::StateVar* s = module_.state(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("cpu executor: no state @", name));
  HostTensor& t = state_.at(s);
  if (state_offset < 0 || bytes < 0 || state_offset + bytes > t.nbytes() || stash_offset < 0 ||
      stash_offset + bytes > static_cast<int64_t>(stash_.size()))
    return absl::OutOfRangeError(absl::StrCat("cpu executor: a stash copy of ", bytes, " bytes between state @", name,
                                              " (", t.nbytes(), " bytes) at ", state_offset, " and the stash (",
                                              stash_.size(), " bytes) at ", stash_offset));
  char* st = (t.dtype() == DType::kF32   ? reinterpret_cast<char*>(t.f32())
              : t.dtype() == DType::kI32 ? reinterpret_cast<char*>(t.i32())
                                         : reinterpret_cast<char*>(t.i64())) +
             state_offset;
  char* sh = stash_.data() + stash_offset;
  if (to_stash)
    std::memcpy(sh, st, static_cast<size_t>(bytes));
  else
    std::memcpy(st, sh, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

const HostTensor* CpuExecutor::state(absl::string_view name) const {
  const ir::StateVar* s = module_.state(name);
  if (s == nullptr) return nullptr;
  auto it = state_.find(s);
  return it == state_.end() ? nullptr : &it->second;
}

absl::StatusOr<const CpuExecutor::Program*> CpuExecutor::Prepare(absl::string_view name) {
  if (auto it = programs_.find(name); it != programs_.end()) return it->second.get();
  const ir::Function* fn = module_.function(name);
  if (fn == nullptr) return absl::NotFoundError(absl::StrCat("cpu executor: the module has no function @", name));
  auto p = std::make_unique<Program>();
  p->fn = fn;
  absl::flat_hash_map<const ir::Value*, int> slot;
  auto new_slot = [&](const ir::Value* v) {
    slot[v] = p->num_slots;
    return p->num_slots++;
  };
  for (unsigned i = 0; i < fn->num_arguments(); ++i) p->arg_slots.push_back(new_slot(fn->argument(i)));
  if (options_.use_memory_plan && fn->attrs().Has("arena_bytes")) {
    p->arena_bytes = fn->attrs().I64Or("arena_bytes", 0);
    p->arg_offsets = fn->attrs().GetI64Array("arena_args").value_or(std::vector<int64_t>{});
    if (p->arg_offsets.size() != fn->num_arguments())
      return absl::InvalidArgumentError(
          absl::StrCat("cpu executor: @", name, ": the memory plan gives no offset per argument"));
  }
  std::vector<int> last_use;
  for (const Op* op : fn->Ops()) {
    if (op->is(OpKind::kSegment)) continue;  // its body follows in program order
    Step s;
    s.op = op;
    for (unsigned i = 0; i < op->num_operands(); ++i) {
      const ir::Value* v = op->operand(i);
      Operand o;
      if (v->kind() == ir::Value::Kind::kWeight) {
        o.kind = Operand::kWeight;
        auto it = weights_.find(v);
        if (it == weights_.end())
          return absl::InternalError(absl::StrCat("cpu executor: weight @", v->name(), " is not bound"));
        o.weight = it->second.get();
      } else if (v->kind() == ir::Value::Kind::kState) {
        o.kind = Operand::kState;
        o.state = v;
      } else {
        auto it = slot.find(v);
        if (it == slot.end())
          return absl::InvalidArgumentError(absl::StrCat("cpu executor: @", name, ": ", op->Summary(), ": operand ", i,
                                                         " is not defined before use"));
        o.slot = it->second;
      }
      s.in.push_back(o);
    }
    for (const ir::Value* r : op->results()) s.out.push_back(new_slot(r));
    if (options_.use_memory_plan && fn->attrs().Has("arena_bytes")) {
      std::vector<int64_t> offs = op->attrs().GetI64Array("arena").value_or(std::vector<int64_t>{});
      if (offs.size() != op->num_results())
        return absl::InvalidArgumentError(
            absl::StrCat("cpu executor: @", name, ": ", op->Summary(), ": the memory plan gives no offset per result"));
      s.out_offsets.assign(offs.begin(), offs.end());
    }
    // gated_attention_step and qk_norm_rope_append append too (their first operands are kv_append's).
    if (op->is(OpKind::kKvAppend) || op->is(OpKind::kGatedAttentionStep) || op->is(OpKind::kQkNormRopeAppend))
      p->kv_appends.push_back(op);
    p->steps.push_back(std::move(s));
  }
  last_use.assign(p->num_slots, -1);
  for (size_t i = 0; i < p->steps.size(); ++i)
    for (const Operand& o : p->steps[i].in)
      if (o.kind == Operand::kSlot) last_use[o.slot] = static_cast<int>(i);
  for (int sl = 0; sl < p->num_slots; ++sl)
    if (last_use[sl] >= 0) p->steps[last_use[sl]].release.push_back(sl);
  const Program* out = p.get();
  programs_[std::string(name)] = std::move(p);
  return out;
}

namespace {

// Evaluates an IR shape under the call's symbol bindings.
absl::StatusOr<llvm::SmallVector<int64_t, 4>> Concrete(const ir::Shape& s, const ir::SymbolBindings& b) {
  llvm::SmallVector<int64_t, 4> out;
  for (const ir::Dim& d : s.dims()) {
    std::optional<int64_t> v = d.Evaluate(b);
    if (!v) return absl::InvalidArgumentError(absl::StrCat("unbound symbol ", d.ToString()));
    out.push_back(*v);
  }
  return out;
}

int64_t Prod(llvm::ArrayRef<int64_t> dims, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, dims.size()); ++i) n *= dims[i];
  return n;
}

llvm::SmallVector<int64_t, 4> WithLast(llvm::ArrayRef<int64_t> s, int64_t last) {
  llvm::SmallVector<int64_t, 4> out(s.begin(), s.end());
  out.back() = last;
  return out;
}

// y = x . w^T over the rows of x (matmul's product; matmul_group, matmul_swiglu and
// add_rms_norm_matmul run theirs through it).
absl::StatusOr<HostTensor> Product(const Op& op, const float* x, llvm::ArrayRef<int64_t> x_shape,
                                   const kc::WeightView& w, kc::ThreadPool* pool) {
  const int64_t K = x_shape.back(), rows = Prod(x_shape) / std::max<int64_t>(K, 1);
  if (w.cols != K) return OpError(op, "K mismatch");
  HostTensor y = HostTensor::Zeros(DType::kF32, WithLast(x_shape, w.rows));
  MEMRA_RETURN_IF_ERROR(kc::Matmul(x, rows, w, y.f32(), pool));
  return y;
}

// The gating of two products (matmul_swiglu, add_rms_norm_matmul {glu}): "gelu" as gelu then mul
// compute it (GeGLU; g is overwritten), else swiglu with its clamp (0: none).
HostTensor GatedProducts(HostTensor& g, const HostTensor& u, bool gelu, float clamp) {
  HostTensor y = HostTensor::Zeros(DType::kF32, g.shape());
  if (gelu) {
    kc::Gelu(g.f32(), g.numel(), g.f32());
    kc::Mul(g.f32(), u.f32(), g.numel(), y.f32());
  } else {
    kc::Swiglu(g.f32(), u.f32(), g.numel(), y.f32(), clamp);
  }
  return y;
}

// One token's qk_norm_rope then kv_append (qk_norm_rope_append's and gated_attention_step's first
// part), by those ops' kernels in their order: q [T, Hq, D] and k [T, Hkv, D] normed and rotated
// (ff: rope's freq factors or null), the rotated k and v (normed without a weight first when
// v_norm_eps is set) appended at position P. Returns the rotated q.
absl::StatusOr<HostTensor> NormRopeAppend(const HostTensor& q, const HostTensor& k, const float* v, const float* qw,
                                          const float* kw, const float* ff, const int32_t* pos, int64_t P,
                                          HostTensor& k_cache, HostTensor& v_cache, const ir::AttrDict& at,
                                          kc::ThreadPool* pool) {
  const int64_t T = k.dim(0), Hq = q.dim(1), Hkv = k.dim(1), D = k.dim(2);
  const float eps = static_cast<float>(at.F64Or("eps", 0));
  const int64_t n_rot = at.I64Or("n_rot", 0);
  const float base = static_cast<float>(at.F64Or("base", 10000.0));
  HostTensor qr = HostTensor::Zeros(DType::kF32, q.shape());
  HostTensor kr = HostTensor::Zeros(DType::kF32, k.shape());
  kc::RmsNorm(q.f32(), qw, T * Hq, D, eps, qr.f32(), pool);
  kc::RopeNeox(qr.f32(), T, Hq, D, n_rot, base, pos, ff);
  kc::RmsNorm(k.f32(), kw, T * Hkv, D, eps, kr.f32(), pool);
  kc::RopeNeox(kr.f32(), T, Hkv, D, n_rot, base, pos, ff);
  const int64_t ring = at.I64Or("ring", 0);
  MEMRA_RETURN_IF_ERROR(kc::KvAppend(kr.f32(), T, Hkv * D, P, k_cache.dim(0), KvOf(k_cache), ring));
  HostTensor vn;
  if (const std::optional<double> ve = at.GetF64("v_norm_eps")) {  // kv_append's v norm
    vn = HostTensor::Zeros(DType::kF32, k.shape());
    kc::RmsNorm(v, nullptr, T * Hkv, D, static_cast<float>(*ve), vn.f32(), pool);
    v = vn.f32();
  }
  MEMRA_RETURN_IF_ERROR(kc::KvAppend(v, T, Hkv * D, P, v_cache.dim(0), KvOf(v_cache), ring));
  return qr;
}

// attention * sigmoid(gate) as sigmoid then mul (a gate per element) or mul_rows (a gate per
// head) compute it (bit-identical): attention_gated's and gated_attention_step's output gate.
HostTensor OutputGate(const HostTensor& y, const HostTensor& gate, int64_t head_dim) {
  const int64_t n = y.numel(), ng = gate.numel();
  HostTensor sg = HostTensor::Zeros(DType::kF32, gate.shape());
  kc::Sigmoid(gate.f32(), ng, sg.f32());
  HostTensor o = HostTensor::Zeros(DType::kF32, y.shape());
  if (ng == n) {
    kc::Mul(y.f32(), sg.f32(), n, o.f32());
  } else {
    kc::ScaleRows(y.f32(), sg.f32(), ng, head_dim, o.f32());
  }
  return o;
}

// moe_experts' / moe_ffn's expert matrices: w_down at operand `first`, w_gate_up after it.
template <typename WeightOf>
kc::MoeExpertWeights ExpertWeights(const Op& op, size_t first, WeightOf wt) {
  kc::MoeExpertWeights w;
  const ir::Shape& down = op.operand(first)->shape();
  w.n_expert = down[0].value();
  w.n_ff = down[2].value();
  w.down = wt(first);
  w.gate = wt(first + 1);
  w.fused = op.num_operands() == first + 2;
  if (!w.fused) w.up = wt(first + 2);
  w.gelu = op.attrs().GetString("activation").value_or("silu") == "gelu";
  w.clamp = static_cast<float>(op.attrs().F64Or("clamp", 0.0));
  return w;
}

// A step's batch description (ir/Ops.def, "sequences"): seq_slot [S] with slots in [-1, S), no
// slot twice; seq_start [S+1] non-decreasing within [0, rows].
absl::Status CheckSeqBatch(const Op& op, const HostTensor& seq_slot, const HostTensor& seq_start, int64_t rows) {
  const int64_t S = seq_slot.numel();
  std::vector<bool> seen(static_cast<size_t>(S), false);
  for (int64_t b = 0; b < S; ++b) {
    const int32_t s = seq_slot.i32()[b];
    if (s < -1 || s >= S) return OpError(op, absl::StrCat("entry ", b, " has slot ", s, ", outside [-1, ", S, ")"));
    if (s >= 0 && seen[s]) return OpError(op, absl::StrCat("slot ", s, " appears in two entries"));
    if (s >= 0) seen[s] = true;
  }
  const int32_t* st = seq_start.i32();
  if (st[0] < 0 || st[S] > rows) return OpError(op, absl::StrCat("seq_start spans rows outside [0, ", rows, "]"));
  for (int64_t b = 0; b < S; ++b)
    if (st[b + 1] < st[b]) return OpError(op, absl::StrCat("seq_start decreases at entry ", b));
  return absl::OkStatus();
}

// The first position of a run of consecutive positions, or an error.
absl::StatusOr<int64_t> ContiguousStart(const Op& op, const HostTensor& pos) {
  const int32_t* p = pos.i32();
  for (int64_t t = 1; t < pos.numel(); ++t)
    if (p[t] != p[0] + t) return OpError(op, "the CPU executor needs consecutive positions within one call");
  return pos.numel() > 0 ? p[0] : 0;
}

}  // namespace

absl::StatusOr<std::vector<HostTensor>> CpuExecutor::Run(absl::string_view name, std::vector<HostTensor> args) {
  MEMRA_ASSIGN_OR_RETURN(const Program* p, Prepare(name));
  const ir::Function& fn = *p->fn;
  // Bind symbols from the argument shapes.
  MEMRA_ASSIGN_OR_RETURN(ir::SymbolBindings bindings, BindArguments(fn, args));
  // Context overflow: refuse before any state changes.
  for (const Op* op : p->kv_appends) {
    MEMRA_ASSIGN_OR_RETURN(auto kshape, Concrete(op->operand(0)->shape(), bindings));
    MEMRA_RETURN_IF_ERROR(CheckKvAppendFits(*op, position(), kshape[0]));
  }

  std::vector<HostTensor> slots(p->num_slots);
  for (size_t i = 0; i < args.size(); ++i) slots[p->arg_slots[i]] = std::move(args[i]);
  // Arena mode: values live at their planned offsets.
  char* arena = nullptr;
  if (p->arena_bytes >= 0) {
    if (!p->arena) {
      // NaN-poisoned: a value read before it is written shows up in the results.
      p->arena = std::make_shared<std::vector<uint64_t>>((p->arena_bytes + 7) / 8, ~uint64_t{0});
    }
    arena = reinterpret_cast<char*>(p->arena->data());
  }
  auto place = [&](HostTensor& t, int64_t offset, const Op* op) -> absl::Status {
    if (offset < 0 || offset + t.nbytes() > p->arena_bytes)
      return absl::InternalError(absl::StrCat("cpu executor: @", name, ": ", op ? op->Summary() : "argument",
                                              ": planned offset ", offset, " + ", t.nbytes(),
                                              " bytes exceeds the arena of ", p->arena_bytes));
    char* dst = arena + offset;
    if (t.data() != dst) std::memmove(dst, t.data(), static_cast<size_t>(t.nbytes()));
    t = HostTensor::View(t.dtype(), t.shape(), p->arena, dst);
    return absl::OkStatus();
  };
  if (arena)
    for (size_t i = 0; i < args.size(); ++i)
      MEMRA_RETURN_IF_ERROR(place(slots[p->arg_slots[i]], p->arg_offsets[i], nullptr));
  kc::ThreadPool* pool = pool_.get();
  std::vector<HostTensor> results;

  const auto call_t0 = std::chrono::steady_clock::now();
  for (const Step& s : p->steps) {
    const Op& op = *s.op;
    const auto op_t0 = options_.profile ? std::chrono::steady_clock::now() : call_t0;
    auto In = [&](size_t i) -> const HostTensor& { return slots[s.in[i].slot]; };
    auto St = [&](size_t i) -> HostTensor& { return state_.at(s.in[i].state); };
    auto Wt = [&](size_t i) -> const BoundWeight& { return *s.in[i].weight; };
    auto F32In = [&](size_t i) -> absl::Status {
      if (In(i).dtype() != DType::kF32)
        return OpError(op, absl::StrCat("operand ", i, " is ", In(i).ShapeString(),
                                        "; the CPU executor computes f32 activations only"));
      return absl::OkStatus();
    };
    llvm::SmallVector<HostTensor, 2> out;
    const ir::AttrDict& at = op.attrs();
    // delta_net_step's arithmetic (ir/Ops.def: conv, split, l2 norms, gates, scan, gated norm, by
    // the kernels of those ops in that order) over x, b, a and z [T, Hv, Dv], the weights and states
    // at the given operand indices (delta_net_step's and matmul_delta_net_step's).
    auto delta_net_step = [&](const HostTensor& x, const HostTensor& b, const HostTensor& a, const HostTensor& z,
                              size_t conv_w, size_t dt_bias, size_t ssm_a, size_t norm_w, size_t conv_st,
                              size_t delta_st) -> HostTensor {
      HostTensor& conv_state = St(conv_st);
      HostTensor& delta_state = St(delta_st);
      const int64_t T = x.dim(0), C = x.dim(1), K = conv_state.dim(1) + 1;
      const int64_t Hv = z.dim(1), Dv = z.dim(2), Dk = delta_state.dim(2);
      const int64_t Hk = (C - Hv * Dv) / (2 * Dk);
      HostTensor c = HostTensor::Zeros(DType::kF32, x.shape());
      kc::Conv1dCausal(x.f32(), T, C, Wt(conv_w).values, K, conv_state.f32(), c.f32(), /*silu=*/true, pool);
      const float eps_qk = static_cast<float>(at.F64Or("qk_l2_eps", 0));
      HostTensor q = HostTensor::Zeros(DType::kF32, {T, Hk, Dk});
      HostTensor k = HostTensor::Zeros(DType::kF32, {T, Hk, Dk});
      HostTensor v = HostTensor::Zeros(DType::kF32, {T, Hv, Dv});
      for (int64_t t = 0; t < T; ++t) {
        const float* row = c.f32() + t * C;
        std::copy(row, row + Hk * Dk, q.f32() + t * Hk * Dk);
        std::copy(row + Hk * Dk, row + 2 * Hk * Dk, k.f32() + t * Hk * Dk);
        std::copy(row + 2 * Hk * Dk, row + C, v.f32() + t * Hv * Dv);
      }
      HostTensor qn = HostTensor::Zeros(DType::kF32, q.shape());
      HostTensor kn = HostTensor::Zeros(DType::kF32, q.shape());
      kc::L2Norm(q.f32(), T * Hk, Dk, eps_qk, qn.f32(), pool);
      kc::L2Norm(k.f32(), T * Hk, Dk, eps_qk, kn.f32(), pool);
      HostTensor beta = HostTensor::Zeros(DType::kF32, {T, Hv});
      HostTensor g = HostTensor::Zeros(DType::kF32, {T, Hv});
      kc::DeltaNetGates(b.f32(), a.f32(), T, Hv, Wt(dt_bias).values, Wt(ssm_a).values, beta.f32(), g.f32());
      HostTensor o = HostTensor::Zeros(DType::kF32, z.shape());
      kc::GatedDeltaScan(qn.f32(), kn.f32(), v.f32(), g.f32(), beta.f32(), T, Hk, Hv, Dk, Dv,
                         static_cast<float>(at.F64Or("scale", 1.0)), delta_state.f32(), o.f32(), pool);
      HostTensor y = HostTensor::Zeros(DType::kF32, z.shape());
      kc::GatedRmsNorm(o.f32(), Wt(norm_w).values, z.f32(), T * Hv, Dv, static_cast<float>(at.F64Or("eps", 0)), y.f32(),
                       pool);
      return y;
    };
    switch (op.kind()) {
      case OpKind::kEmbed: {
        const HostTensor& ids = In(0);
        const kc::WeightView& tab = Wt(1).view;
        llvm::SmallVector<int64_t, 4> shape(ids.shape().begin(), ids.shape().end());
        shape.push_back(tab.cols);
        HostTensor y = HostTensor::Zeros(DType::kF32, shape);
        MEMRA_RETURN_IF_ERROR(kc::Embed(tab, ids.i32_span(), y.f32(), pool));
        out.push_back(y);
        break;
      }
      case OpKind::kRmsNorm:
      case OpKind::kL2Norm: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        const int64_t cols = x.dim(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        const float eps = static_cast<float>(at.F64Or("eps", 0));
        if (op.is(OpKind::kRmsNorm))
          kc::RmsNorm(x.f32(), op.num_operands() > 1 ? Wt(1).values : nullptr, rows, cols, eps, y.f32(), pool);
        else
          kc::L2Norm(x.f32(), rows, cols, eps, y.f32(), pool);
        out.push_back(y);
        break;
      }
      case OpKind::kAdd:
      case OpKind::kMul: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(1));
        const HostTensor& a = In(0);
        const HostTensor& b = In(1);
        HostTensor y = HostTensor::Zeros(DType::kF32, a.shape());
        const int64_t na = a.numel(), nb = b.numel();
        if (nb == 0 || na % nb != 0) return OpError(op, "broadcast operand does not divide the first");
        for (int64_t o = 0; o < na; o += nb) {
          if (op.is(OpKind::kAdd))
            kc::Add(a.f32() + o, b.f32(), nb, y.f32() + o);
          else
            kc::Mul(a.f32() + o, b.f32(), nb, y.f32() + o);
        }
        out.push_back(y);
        break;
      }
      case OpKind::kMulRows: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(1));
        const HostTensor& x = In(0);
        const int64_t width = x.dim(-1);
        if (In(1).numel() * width != x.numel()) return OpError(op, "the factors are not one per row of x");
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        kc::ScaleRows(x.f32(), In(1).f32(), x.numel() / std::max<int64_t>(width, 1), width, y.f32());
        out.push_back(y);
        break;
      }
      case OpKind::kScale: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        const float f = static_cast<float>(at.F64Or("factor", 1.0));
        for (int64_t i = 0; i < x.numel(); ++i) y.f32()[i] = x.f32()[i] * f;
        out.push_back(y);
        break;
      }
      case OpKind::kSwiglu: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        HostTensor y = HostTensor::Zeros(DType::kF32, In(0).shape());
        kc::Swiglu(In(0).f32(), In(1).f32(), In(0).numel(), y.f32(), static_cast<float>(at.F64Or("clamp", 0.0)));
        out.push_back(y);
        break;
      }
      case OpKind::kSoftmax: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        const int64_t cols = x.dim(-1);
        kc::Softmax(x.f32(), x.numel() / std::max<int64_t>(cols, 1), cols, y.f32());
        out.push_back(y);
        break;
      }
      case OpKind::kMatMul:
      case OpKind::kMatMulGroup: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        for (size_t i = 1; i < s.in.size(); ++i) {
          MEMRA_ASSIGN_OR_RETURN(HostTensor y, Product(op, x.f32(), x.shape(), Wt(i).view, pool));
          out.push_back(std::move(y));
        }
        break;
      }
      case OpKind::kMatMulSwiglu: {
        // The two products and the gating exactly as matmul, matmul, swiglu (or gelu, mul) compute
        // them (bit-identical).
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        if (Wt(1).view.rows != Wt(2).view.rows) return OpError(op, "weight shape mismatch");
        MEMRA_ASSIGN_OR_RETURN(HostTensor g, Product(op, x.f32(), x.shape(), Wt(1).view, pool));
        MEMRA_ASSIGN_OR_RETURN(HostTensor u, Product(op, x.f32(), x.shape(), Wt(2).view, pool));
        out.push_back(GatedProducts(g, u, at.GetString("activation").value_or("silu") == "gelu",
                                    static_cast<float>(at.F64Or("clamp", 0.0))));
        break;
      }
      case OpKind::kQkNormRope: {
        // rms_norm then rope of q and of k, as the separate ops compute them (bit-identical).
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(1));
        const float eps = static_cast<float>(at.F64Or("eps", 0));
        const int64_t n_rot = at.I64Or("n_rot", 0);
        const float base = static_cast<float>(at.F64Or("base", 10000.0));
        for (size_t i : {0, 1}) {
          const HostTensor& x = In(i);
          const int64_t cols = x.dim(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
          HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
          kc::RmsNorm(x.f32(), Wt(2 + i).values, rows, cols, eps, y.f32(), pool);
          kc::RopeNeox(y.f32(), x.dim(0), x.dim(1), x.dim(2), n_rot, base, In(4).i32(),
                       op.num_operands() > 5 ? Wt(5).values : nullptr);
          out.push_back(y);
        }
        break;
      }
      case OpKind::kQGateSplit: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& qg = In(0);
        const int64_t H = at.I64Or("n_head", 0), D = at.I64Or("head_dim", 0), T = qg.dim(0);
        HostTensor q = HostTensor::Zeros(DType::kF32, {T, H, D});
        HostTensor g = HostTensor::Zeros(DType::kF32, {T, H, D});
        kc::QGateSplit(qg.f32(), T, H, D, q.f32(), g.f32());
        out.push_back(q);
        out.push_back(g);
        break;
      }
      case OpKind::kRope: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        HostTensor y = HostTensor::FromF32(std::vector<float>(x.f32(), x.f32() + x.numel()), x.shape());
        kc::RopeNeox(y.f32(), x.dim(0), x.dim(1), x.dim(2), at.I64Or("n_rot", 0),
                     static_cast<float>(at.F64Or("base", 10000.0)), In(1).i32(),
                     op.num_operands() > 2 ? Wt(2).values : nullptr);
        out.push_back(y);
        break;
      }
      case OpKind::kMulWeight: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        const float* w = Wt(1).values;
        const int64_t n = x.numel(), cols = x.dim(-1), wn = op.operand(1)->shape()[0].value();
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        for (int64_t i = 0; i < n; ++i) y.f32()[i] = x.f32()[i] * w[wn == 1 ? 0 : i % cols];
        out.push_back(y);
        break;
      }
      case OpKind::kPositions: {
        const int32_t base = St(0).i32()[0];
        const int64_t T = In(1).dim(0);
        HostTensor pos = HostTensor::Zeros(DType::kI32, {T});
        for (int64_t t = 0; t < T; ++t) pos.i32()[t] = static_cast<int32_t>(base + t);
        out.push_back(pos);
        break;
      }
      case OpKind::kAdvancePositions:
        St(0).i32()[0] += static_cast<int32_t>(In(1).dim(0));
        break;
      case OpKind::kKvAppend: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_ASSIGN_OR_RETURN(int64_t P, ContiguousStart(op, In(4)));
        const HostTensor& k = In(0);
        const int64_t T = k.dim(0), width = k.dim(1) * k.dim(2);
        HostTensor& kc_ = St(2);
        HostTensor& vc_ = St(3);
        const int64_t ring = at.I64Or("ring", 0);
        MEMRA_RETURN_IF_ERROR(kc::KvAppend(k.f32(), T, width, P, kc_.dim(0), KvOf(kc_), ring));
        const float* v = In(1).f32();
        HostTensor vn;
        if (const std::optional<double> eps = at.GetF64("v_norm_eps")) {  // fuse-kv-append-norm: rms_norm(v) first
          MEMRA_RETURN_IF_ERROR(F32In(1));
          const int64_t d = In(1).dim(-1);
          vn = HostTensor::Zeros(DType::kF32, In(1).shape());
          kc::RmsNorm(v, nullptr, In(1).numel() / std::max<int64_t>(d, 1), d, static_cast<float>(*eps), vn.f32(), pool);
          v = vn.f32();
        }
        MEMRA_RETURN_IF_ERROR(kc::KvAppend(v, T, width, P, vc_.dim(0), KvOf(vc_), ring));
        break;
      }
      case OpKind::kAttention:
      case OpKind::kAttentionGated: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_ASSIGN_OR_RETURN(int64_t P, ContiguousStart(op, In(3)));
        const HostTensor& q = In(0);
        const HostTensor& kc_ = St(1);
        const int64_t T = q.dim(0);
        const bool ring = at.I64Or("ring", 0) > 0;
        if (!ring && P + T > kc_.dim(0)) return OpError(op, "attention past the KV cache");
        HostTensor y = HostTensor::Zeros(DType::kF32, q.shape());
        kc::CausalAttention(q.f32(), T, P, KvOf(kc_), KvOf(St(2)), q.dim(1), kc_.dim(1), q.dim(2),
                            static_cast<float>(at.F64Or("scale", 1.0)), y.f32(), pool, at.I64Or("window", 0),
                            ring ? kc_.dim(0) : 0);
        if (op.is(OpKind::kAttentionGated)) {
          MEMRA_RETURN_IF_ERROR(F32In(4));
          y = OutputGate(y, In(4), q.dim(2));
        }
        out.push_back(y);
        break;
      }
      case OpKind::kQkNormRopeAppend: {
        // The two ops it replaced (ir/Ops.def), by the same kernels in the same order.
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(1));
        MEMRA_RETURN_IF_ERROR(F32In(5));
        MEMRA_ASSIGN_OR_RETURN(int64_t P, ContiguousStart(op, In(4)));
        MEMRA_ASSIGN_OR_RETURN(HostTensor qr, NormRopeAppend(In(5), In(0), In(1).f32(), Wt(6).values, Wt(7).values,
                                                             op.num_operands() > 8 ? Wt(8).values : nullptr,
                                                             In(4).i32(), P, St(2), St(3), at, pool));
        out.push_back(qr);
        break;
      }
      case OpKind::kGatedAttentionStep: {
        // The four ops it replaced (ir/Ops.def), by the same kernels in the same order.
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(5));
        MEMRA_ASSIGN_OR_RETURN(int64_t P, ContiguousStart(op, In(4)));
        const HostTensor& k = In(0);
        const HostTensor& qg = In(5);
        HostTensor& kc_ = St(2);
        HostTensor& vc_ = St(3);
        const int64_t T = k.dim(0), Hkv = k.dim(1), D = k.dim(2), H = at.I64Or("n_head", 0);
        HostTensor q = HostTensor::Zeros(DType::kF32, {T, H, D});
        HostTensor gate = HostTensor::Zeros(DType::kF32, {T, H, D});
        kc::QGateSplit(qg.f32(), T, H, D, q.f32(), gate.f32());
        MEMRA_ASSIGN_OR_RETURN(HostTensor qr, NormRopeAppend(q, k, In(1).f32(), Wt(6).values, Wt(7).values, nullptr,
                                                             In(4).i32(), P, kc_, vc_, at, pool));
        const int64_t ring = at.I64Or("ring", 0);
        if (ring == 0 && P + T > kc_.dim(0)) return OpError(op, "attention past the KV cache");
        HostTensor y = HostTensor::Zeros(DType::kF32, q.shape());
        kc::CausalAttention(qr.f32(), T, P, KvOf(kc_), KvOf(vc_), H, Hkv, D, static_cast<float>(at.F64Or("scale", 1.0)),
                            y.f32(), pool, at.I64Or("window", 0), ring > 0 ? kc_.dim(0) : 0);
        out.push_back(OutputGate(y, gate, D));
        break;
      }
      case OpKind::kConv1dCausal:
      case OpKind::kSeqConv1dCausal: {
        // One sequence, or per entry of a step on its slot's ring (the same kernel per entry).
        const bool seq = op.is(OpKind::kSeqConv1dCausal);
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        HostTensor& st = St(2);
        const int64_t T = x.dim(0), C = x.dim(1), K = st.dim(seq ? 2 : 1) + 1;
        const bool silu = at.GetString("activation").has_value();
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        if (!seq) {
          kc::Conv1dCausal(x.f32(), T, C, Wt(1).values, K, st.f32(), y.f32(), silu, pool);
        } else {
          MEMRA_RETURN_IF_ERROR(CheckSeqBatch(op, In(3), In(4), T));
          const int32_t* start = In(4).i32();
          for (int64_t b = 0; b < In(3).numel(); ++b) {
            const int32_t s = In(3).i32()[b];
            const int64_t n = start[b + 1] - start[b];
            if (s < 0 || n <= 0) continue;
            kc::Conv1dCausal(x.f32() + start[b] * C, n, C, Wt(1).values, K, st.f32() + s * C * (K - 1),
                             y.f32() + start[b] * C, silu, pool);
          }
        }
        out.push_back(y);
        break;
      }
      case OpKind::kDeltaNetGates: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& b = In(0);
        const int64_t T = b.dim(0), Hv = b.dim(1);
        HostTensor beta = HostTensor::Zeros(DType::kF32, b.shape());
        HostTensor g = HostTensor::Zeros(DType::kF32, b.shape());
        kc::DeltaNetGates(b.f32(), In(1).f32(), T, Hv, Wt(2).values, Wt(3).values, beta.f32(), g.f32());
        out.push_back(beta);
        out.push_back(g);
        break;
      }
      case OpKind::kGatedDeltaScan:
      case OpKind::kSeqGatedDeltaScan: {
        // One sequence, or per entry of a step on its slot's state (the same kernel per entry).
        const bool seq = op.is(OpKind::kSeqGatedDeltaScan);
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& q = In(0);
        const HostTensor& v = In(2);
        const int64_t T = q.dim(0), Hk = q.dim(1), Dk = q.dim(2), Hv = v.dim(1), Dv = v.dim(2);
        if (seq) MEMRA_RETURN_IF_ERROR(CheckSeqBatch(op, In(6), In(7), T));
        HostTensor o = HostTensor::Zeros(DType::kF32, v.shape());
        const float* qp = q.f32();
        const float* kp = In(1).f32();
        HostTensor qn, kn;
        if (std::optional<double> eps = at.GetF64("qk_l2_eps")) {  // the fused l2 norms
          qn = HostTensor::Zeros(DType::kF32, q.shape());
          kn = HostTensor::Zeros(DType::kF32, q.shape());
          kc::L2Norm(qp, T * Hk, Dk, static_cast<float>(*eps), qn.f32(), pool);
          kc::L2Norm(kp, T * Hk, Dk, static_cast<float>(*eps), kn.f32(), pool);
          qp = qn.f32();
          kp = kn.f32();
        }
        const float scale = static_cast<float>(at.F64Or("scale", 1.0));
        auto scan = [&](int64_t r0, int64_t n, float* state) {
          kc::GatedDeltaScan(qp + r0 * Hk * Dk, kp + r0 * Hk * Dk, v.f32() + r0 * Hv * Dv, In(3).f32() + r0 * Hv,
                             In(4).f32() + r0 * Hv, n, Hk, Hv, Dk, Dv, scale, state, o.f32() + r0 * Hv * Dv, pool);
        };
        if (!seq) {
          scan(0, T, St(5).f32());
        } else {
          const int32_t* start = In(7).i32();
          for (int64_t b = 0; b < In(6).numel(); ++b) {
            const int32_t s = In(6).i32()[b];
            const int64_t n = start[b + 1] - start[b];
            if (s >= 0 && n > 0) scan(start[b], n, St(5).f32() + s * Hv * Dv * Dk);
          }
        }
        out.push_back(o);
        break;
      }
      case OpKind::kDeltaNetStep: {
        // The ops it replaced (ir/Ops.def: conv, split, l2 norms, gates, scan, gated norm), by the
        // same kernels in the same order.
        MEMRA_RETURN_IF_ERROR(F32In(0));
        out.push_back(delta_net_step(In(0), In(2), In(3), In(6), 1, 4, 5, 7, 8, 9));
        break;
      }
      case OpKind::kMatMulDeltaNetStep: {
        // matmul_group, then delta_net_step over its results (z viewed as [T, Hv, Dv]), by the
        // same kernels in the same order: the two ops' bits.
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        HostTensor p[4];
        for (size_t i = 0; i < 4; ++i) {
          MEMRA_ASSIGN_OR_RETURN(p[i], Product(op, x.f32(), x.shape(), Wt(i + 1).view, pool));
        }
        const ir::Shape& hv = op.operand(6)->shape();  // dt_bias [Hv]
        const ir::Shape& dv = op.operand(8)->shape();  // norm_w [Dv]
        if (hv.rank() != 1 || dv.rank() != 1 || !hv[0].IsConstant() || !dv[0].IsConstant())
          return OpError(op, "dt_bias and norm_w must be [Hv] and [Dv]");
        const int64_t T = x.dim(0), Hv = hv[0].value(), Dv = dv[0].value();
        if (Hv <= 0 || Dv <= 0 || p[1].numel() != T * Hv * Dv) return OpError(op, "z's rows are not Hv x Dv");
        HostTensor z = HostTensor::Zeros(DType::kF32, {T, Hv, Dv});
        std::copy(p[1].f32(), p[1].f32() + p[1].numel(), z.f32());
        out.push_back(delta_net_step(p[0], p[2], p[3], z, 5, 6, 7, 8, 9, 10));
        break;
      }
      case OpKind::kGatedRmsNorm: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        const int64_t cols = x.dim(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        kc::GatedRmsNorm(x.f32(), Wt(2).values, In(1).f32(), rows, cols, static_cast<float>(at.F64Or("eps", 0)),
                         y.f32(), pool);
        out.push_back(y);
        break;
      }
      case OpKind::kFusedRows: {
        MEMRA_ASSIGN_OR_RETURN(ir::RowProgram prog, ir::RowProgram::Parse(at.GetString("program").value_or(""),
                                                                          static_cast<int>(op.num_operands())));
        const HostTensor* rows_of = nullptr;
        llvm::SmallVector<kc::RowOperand, 8> ins;
        for (size_t i = 0; i < op.num_operands(); ++i) {
          if (s.in[i].kind == Operand::kWeight) {
            ins.push_back({Wt(i).values, op.operand(i)->shape().NumElements().value_or(0), true});
            continue;
          }
          MEMRA_RETURN_IF_ERROR(F32In(i));
          if (rows_of == nullptr) rows_of = &In(i);
          ins.push_back({In(i).f32(), In(i).numel(), false});
        }
        if (rows_of == nullptr) return OpError(op, "no activation operand");
        const int64_t cols = rows_of->dim(-1), rows = rows_of->numel() / std::max<int64_t>(cols, 1);
        llvm::SmallVector<float*, 4> ys;
        for (size_t i = 0; i < prog.yields.size(); ++i) {
          out.push_back(HostTensor::Zeros(DType::kF32, rows_of->shape()));
          ys.push_back(out.back().f32());
        }
        MEMRA_RETURN_IF_ERROR(kc::FusedRows(prog, ins, rows, cols, ys, pool));
        break;
      }
      case OpKind::kAddRmsNorm: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& a = In(0);
        const int64_t cols = a.dim(-1), rows = a.numel() / std::max<int64_t>(cols, 1);
        HostTensor sum = HostTensor::Zeros(DType::kF32, a.shape());
        HostTensor y = HostTensor::Zeros(DType::kF32, a.shape());
        kc::Add(a.f32(), In(1).f32(), a.numel(), sum.f32());
        kc::RmsNorm(sum.f32(), Wt(2).values, rows, cols, static_cast<float>(at.F64Or("eps", 0)), y.f32(), pool);
        out.push_back(sum);
        out.push_back(y);
        break;
      }
      case OpKind::kMatMulAddRmsNorm: {
        // matmul, then add_rms_norm as the separate ops compute them (bit-identical: the sum's
        // operand order does not change an f32 addition).
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(2));
        const HostTensor& x = In(0);
        MEMRA_ASSIGN_OR_RETURN(HostTensor sum, Product(op, x.f32(), x.shape(), Wt(1).view, pool));
        const int64_t N = sum.dim(-1), rows = sum.numel() / std::max<int64_t>(N, 1);
        if (In(2).numel() != sum.numel()) return OpError(op, "b must have the product's shape");
        HostTensor y = HostTensor::Zeros(DType::kF32, sum.shape());
        kc::Add(sum.f32(), In(2).f32(), sum.numel(), sum.f32());
        kc::RmsNorm(sum.f32(), Wt(3).values, rows, N, static_cast<float>(at.F64Or("eps", 0)), y.f32(), pool);
        out.push_back(sum);
        out.push_back(y);
        break;
      }
      case OpKind::kAddRmsNormMatMul: {
        // add_rms_norm, then the products as matmul (one per matrix) or matmul_swiglu compute them.
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& a = In(0);
        const int64_t K = a.dim(-1), rows = a.numel() / std::max<int64_t>(K, 1);
        HostTensor sum = HostTensor::Zeros(DType::kF32, a.shape());
        HostTensor n = HostTensor::Zeros(DType::kF32, a.shape());
        kc::Add(a.f32(), In(1).f32(), a.numel(), sum.f32());
        kc::RmsNorm(sum.f32(), Wt(2).values, rows, K, static_cast<float>(at.F64Or("eps", 0)), n.f32(), pool);
        out.push_back(sum);
        std::vector<HostTensor> products;
        for (size_t i = 3; i < s.in.size(); ++i) {
          MEMRA_ASSIGN_OR_RETURN(HostTensor y, Product(op, n.f32(), n.shape(), Wt(i).view, pool));
          products.push_back(std::move(y));
        }
        if (const std::optional<std::string> glu = at.GetString("glu")) {
          if (products.size() != 2 || products[0].numel() != products[1].numel())
            return OpError(op, "glu takes two products of one shape");
          out.push_back(
              GatedProducts(products[0], products[1], *glu == "gelu", static_cast<float>(at.F64Or("clamp", 0.0))));
        } else {
          for (HostTensor& y : products) out.push_back(std::move(y));
        }
        break;
      }
      case OpKind::kMoeRoute: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& l = In(0);
        const int64_t T = l.dim(0), E = l.dim(1), k = at.I64Or("k", 0);
        if (k <= 0 || k > E) return OpError(op, "k must be in [1, E]");
        HostTensor w = HostTensor::Zeros(DType::kF32, {T, k});
        HostTensor ids = HostTensor::Zeros(DType::kI32, {T, k});
        kc::MoeRoute(l.f32(), T, E, k, w.f32(), ids.i32(), op.num_operands() > 1 ? Wt(1).values : nullptr);
        out.push_back(w);
        out.push_back(ids);
        break;
      }
      case OpKind::kMoeRouteSigmoid: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& l = In(0);
        const int64_t T = l.dim(0), E = l.dim(1), k = at.I64Or("k", 0);
        if (k <= 0 || k > E) return OpError(op, "k must be in [1, E]");
        HostTensor w = HostTensor::Zeros(DType::kF32, {T, k});
        HostTensor ids = HostTensor::Zeros(DType::kI32, {T, k});
        kc::MoeRouteSigmoid(l.f32(), T, E, k, op.num_operands() > 1 ? Wt(1).values : nullptr, at.I64Or("norm", 0) != 0,
                            static_cast<float>(at.F64Or("scale", 0.0)), w.f32(), ids.i32());
        out.push_back(w);
        out.push_back(ids);
        break;
      }
      case OpKind::kMoeRouter: {
        // matmul, then moe_route or moe_route_sigmoid, as the separate ops compute them (bit-identical).
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        MEMRA_ASSIGN_OR_RETURN(HostTensor l, Product(op, x.f32(), x.shape(), Wt(1).view, pool));
        const int64_t T = l.dim(0), E = l.dim(1), k = at.I64Or("k", 0);
        if (k <= 0 || k > E) return OpError(op, "k must be in [1, E]");
        HostTensor w = HostTensor::Zeros(DType::kF32, {T, k});
        HostTensor ids = HostTensor::Zeros(DType::kI32, {T, k});
        const float* per_expert = op.num_operands() > 2 ? Wt(2).values : nullptr;
        if (at.GetString("gate").value_or("softmax") == "sigmoid") {
          kc::MoeRouteSigmoid(l.f32(), T, E, k, per_expert, at.I64Or("norm", 0) != 0,
                              static_cast<float>(at.F64Or("scale", 0.0)), w.f32(), ids.i32());
        } else {
          kc::MoeRoute(l.f32(), T, E, k, w.f32(), ids.i32(), per_expert);
        }
        out.push_back(w);
        out.push_back(ids);
        break;
      }
      case OpKind::kMoeExperts:
      case OpKind::kMoeFfn:
      case OpKind::kMoeFfnUngated: {
        // moe_ffn = gated_add(moe_experts, shared expert, shared gate), moe_ffn_ungated =
        // add(moe_experts, shared expert), each part exactly as its op computes it (bit-identical
        // to the unfused ops).
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(1));
        const HostTensor& x = In(0);
        const int64_t T = x.dim(0), K = x.dim(1), k = In(1).dim(1);
        const bool ffn = op.is(OpKind::kMoeFfn), ungated = op.is(OpKind::kMoeFfnUngated);
        kc::MoeExpertWeights ew = ExpertWeights(op,
                                                ffn       ? 7
                                                : ungated ? 6
                                                          : 3,
                                                [&](size_t i) -> const kc::WeightView& { return Wt(i).view; });
        if (const int64_t parts = at.I64Or("expert_parts", 1); parts > 1) {
          // Expert parallelism: this rank's part of the experts (ir/Ops.def moe_experts).
          Communicator* comm = options_.communicator;
          const int64_t ranks = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
          if (ranks % parts != 0 && parts % ranks != 0)
            return OpError(op, absl::StrCat(parts, " expert parts on a group of ", ranks, " ranks"));
          ew.first_expert = rank * parts / ranks * ew.n_expert;
          ew.n_routed = ew.n_expert * parts;
        }
        HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
        MEMRA_RETURN_IF_ERROR(kc::MoeExperts(x.f32(), T, K, In(1).f32(), In(2).i32(), k, ew, y.f32(), pool));
        if (ffn) {
          const kc::WeightView& gi = Wt(3).view;
          const kc::WeightView& sg = Wt(4).view;
          const kc::WeightView& su = Wt(5).view;
          const kc::WeightView& sd = Wt(6).view;
          HostTensor g = HostTensor::Zeros(DType::kF32, {T, sg.rows});
          HostTensor u = HostTensor::Zeros(DType::kF32, {T, su.rows});
          MEMRA_RETURN_IF_ERROR(kc::Matmul(x.f32(), T, sg, g.f32(), pool));
          MEMRA_RETURN_IF_ERROR(kc::Matmul(x.f32(), T, su, u.f32(), pool));
          kc::Swiglu(g.f32(), u.f32(), g.numel(), g.f32());
          HostTensor sh = HostTensor::Zeros(DType::kF32, x.shape());
          MEMRA_RETURN_IF_ERROR(kc::Matmul(g.f32(), T, sd, sh.f32(), pool));
          HostTensor gl = HostTensor::Zeros(DType::kF32, {T, 1});
          MEMRA_RETURN_IF_ERROR(kc::Matmul(x.f32(), T, gi, gl.f32(), pool));
          kc::GatedAdd(y.f32(), sh.f32(), gl.f32(), T, K, y.f32());
        }
        if (ungated) {
          // The shared expert as matmul_swiglu {clamp} then matmul compute it; then the add.
          if (Wt(3).view.rows != Wt(4).view.rows) return OpError(op, "shared expert weight shape mismatch");
          MEMRA_ASSIGN_OR_RETURN(HostTensor g, Product(op, x.f32(), x.shape(), Wt(3).view, pool));
          MEMRA_ASSIGN_OR_RETURN(HostTensor u, Product(op, x.f32(), x.shape(), Wt(4).view, pool));
          HostTensor h = GatedProducts(g, u, false, static_cast<float>(at.F64Or("clamp", 0.0)));
          MEMRA_ASSIGN_OR_RETURN(HostTensor sh, Product(op, h.f32(), h.shape(), Wt(5).view, pool));
          kc::Add(y.f32(), sh.f32(), y.numel(), y.f32());
        }
        out.push_back(y);
        break;
      }
      case OpKind::kGatedAdd: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        MEMRA_RETURN_IF_ERROR(F32In(1));
        MEMRA_RETURN_IF_ERROR(F32In(2));
        const HostTensor& a = In(0);
        const int64_t n = a.dim(-1), rows = a.numel() / std::max<int64_t>(n, 1);
        HostTensor y = HostTensor::Zeros(DType::kF32, a.shape());
        kc::GatedAdd(a.f32(), In(1).f32(), In(2).f32(), rows, n, y.f32());
        out.push_back(y);
        break;
      }
      case OpKind::kSeqPositions: {
        const HostTensor& tok_seq = In(1);
        const HostTensor& seq_slot = In(2);
        const HostTensor& seq_start = In(3);
        const int64_t T = tok_seq.dim(0), S = seq_slot.numel();
        MEMRA_RETURN_IF_ERROR(CheckSeqBatch(op, seq_slot, seq_start, T));
        const int32_t* counter = St(0).i32();
        HostTensor pos = HostTensor::Zeros(DType::kI32, {T});
        HostTensor slot = HostTensor::Zeros(DType::kI32, {T});
        for (int64_t t = 0; t < T; ++t) {
          const int32_t b = tok_seq.i32()[t];
          const int32_t s = b >= 0 && b < S ? seq_slot.i32()[b] : -1;
          if (b >= 0 && (s < 0 || t < seq_start.i32()[b] || t >= seq_start.i32()[b + 1]))
            return OpError(op, absl::StrCat("row ", t, " names entry ", b, ", which does not own it"));
          pos.i32()[t] = s >= 0 ? counter[s] + static_cast<int32_t>(t - seq_start.i32()[b]) : -1;
          slot.i32()[t] = s;
        }
        out.push_back(pos);
        out.push_back(slot);
        break;
      }
      case OpKind::kSeqAdvancePositions: {
        const HostTensor& seq_slot = In(1);
        const int32_t* st = In(2).i32();
        for (int64_t b = 0; b < seq_slot.numel(); ++b)
          if (const int32_t s = seq_slot.i32()[b]; s >= 0) St(0).i32()[s] += st[b + 1] - st[b];
        break;
      }
      case OpKind::kPagedKvAppend: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& k = In(0);
        const HostTensor& blocks = St(4);
        const int32_t* pos = In(5).i32();
        const int32_t* slot = In(6).i32();
        HostTensor& kc_ = St(2);
        const int64_t T = k.dim(0), width = k.dim(1) * k.dim(2), BS = kc_.dim(1), NB = kc_.dim(0);
        const int64_t MB = blocks.dim(1);
        for (int64_t t = 0; t < T; ++t) {
          if (slot[t] < 0) continue;
          if (pos[t] < 0 || pos[t] >= MB * BS)
            return absl::OutOfRangeError(absl::StrCat("cpu executor: ", op.Summary(), ": row ", t, " at position ",
                                                      pos[t], " is past the slot's context of ", MB * BS));
          const int32_t blk = blocks.i32()[slot[t] * MB + pos[t] / BS];
          if (blk < 0 || blk >= NB)
            return absl::FailedPreconditionError(absl::StrCat("cpu executor: ", op.Summary(), ": slot ", slot[t],
                                                              " has no KV block for position ", pos[t]));
          const int64_t dst = (static_cast<int64_t>(blk) * BS + pos[t] % BS) * width;
          MEMRA_RETURN_IF_ERROR(kc::StoreKvElements(k.f32() + t * width, width, KvOf(kc_), dst));
          MEMRA_RETURN_IF_ERROR(kc::StoreKvElements(In(1).f32() + t * width, width, KvOf(St(3)), dst));
        }
        break;
      }
      case OpKind::kPagedAttention: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& q = In(0);
        const HostTensor& kc_ = St(1);
        const HostTensor& blocks = St(3);
        HostTensor y = HostTensor::Zeros(DType::kF32, q.shape());
        MEMRA_RETURN_IF_ERROR(
            kc::PagedAttention(q.f32(), q.dim(0), In(4).i32(), In(5).i32(), blocks.i32(), blocks.dim(1), kc_.dim(1),
                               kc_.dim(0), KvOf(kc_), KvOf(St(2)), q.dim(1), kc_.dim(2), q.dim(2),
                               static_cast<float>(at.F64Or("scale", 1.0)), y.f32(), pool, at.I64Or("window", 0)));
        out.push_back(y);
        break;
      }
      case OpKind::kTakeSeqLastRows: {
        const HostTensor& x = In(0);
        const int32_t* start = In(1).i32();
        const int64_t B = In(1).numel() - 1, rows = x.dim(0), row = x.numel() / std::max<int64_t>(rows, 1);
        llvm::SmallVector<int64_t, 4> shape(x.shape().begin(), x.shape().end());
        shape[0] = B;
        if (x.dtype() != DType::kF32) return OpError(op, "unsupported dtype");
        HostTensor y = HostTensor::Zeros(DType::kF32, shape);
        for (int64_t b = 0; b < B; ++b) {
          const int64_t last = start[b + 1] - 1;
          if (start[b + 1] <= start[b] || last < 0 || last >= rows) continue;
          std::memcpy(y.f32() + b * row, x.f32() + last * row, row * sizeof(float));
        }
        out.push_back(y);
        break;
      }
      case OpKind::kAllReduce:
      case OpKind::kAllGather: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        Communicator* comm = options_.communicator;
        if (op.is(OpKind::kAllReduce)) {
          HostTensor y = x.Clone();
          if (comm) MEMRA_RETURN_IF_ERROR(comm->AllReduceSum(y.f32(), y.numel()));
          out.push_back(y);
          break;
        }
        const int64_t parts = at.I64Or("parts", 1), ranks = comm ? comm->size() : 1;
        if (parts != ranks)
          return OpError(op, absl::StrCat("gathers ", parts, " parts on a group of ", ranks, " ranks"));
        int64_t axis = at.I64Or("axis", 0);
        if (axis < 0) axis += x.rank();
        const int64_t outer = Prod(x.shape(), 0, axis), block = x.numel() / std::max<int64_t>(outer, 1);
        // Gathered as each rank's whole x in rank order, then interleaved along the axis.
        std::vector<float> all(static_cast<size_t>(x.numel() * parts));
        if (comm)
          MEMRA_RETURN_IF_ERROR(comm->AllGather(x.f32(), x.numel(), all.data()));
        else
          std::memcpy(all.data(), x.f32(), static_cast<size_t>(x.numel()) * sizeof(float));
        llvm::SmallVector<int64_t, 4> shape(x.shape().begin(), x.shape().end());
        shape[axis] *= parts;
        HostTensor y = HostTensor::Zeros(DType::kF32, shape);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t r = 0; r < parts; ++r)
            std::memcpy(y.f32() + (o * parts + r) * block, all.data() + r * x.numel() + o * block,
                        static_cast<size_t>(block) * sizeof(float));
        out.push_back(y);
        break;
      }
      case OpKind::kTakeLastRow: {
        const HostTensor& x = In(0);
        llvm::SmallVector<int64_t, 4> shape(x.shape().begin(), x.shape().end());
        const int64_t rows = shape[0], row = x.numel() / std::max<int64_t>(rows, 1);
        shape[0] = 1;
        HostTensor y = HostTensor::Zeros(x.dtype(), shape);
        if (x.dtype() == DType::kF32)
          std::memcpy(y.f32(), x.f32() + (rows - 1) * row, row * sizeof(float));
        else if (x.dtype() == DType::kI32)
          std::memcpy(y.i32(), x.i32() + (rows - 1) * row, row * sizeof(int32_t));
        else
          return OpError(op, "unsupported dtype");
        out.push_back(y);
        break;
      }
      case OpKind::kArgmax:
      case OpKind::kTopK:
      case OpKind::kSample: {
        MEMRA_RETURN_IF_ERROR(F32In(0));
        const HostTensor& x = In(0);
        const int64_t N = x.dim(-1), rows = x.numel() / std::max<int64_t>(N, 1);
        llvm::SmallVector<int64_t, 4> lead(x.shape().begin(), x.shape().end() - 1);
        if (op.is(OpKind::kTopK)) {
          const int64_t k = at.I64Or("k", 1);
          HostTensor vals = HostTensor::Zeros(DType::kF32, WithLast(x.shape(), k));
          HostTensor idx = HostTensor::Zeros(DType::kI32, WithLast(x.shape(), k));
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<kc::TokenCandidate> c = kc::TopKCandidates(x.f32() + r * N, N, static_cast<int>(k));
            for (int64_t j = 0; j < k; ++j) {
              vals.f32()[r * k + j] = c[j].logit;
              idx.i32()[r * k + j] = c[j].id;
            }
          }
          out.push_back(vals);
          out.push_back(idx);
        } else {
          HostTensor ids = HostTensor::Zeros(DType::kI32, lead);
          for (int64_t r = 0; r < rows; ++r) {
            if (op.is(OpKind::kArgmax)) {
              ids.i32()[r] = kc::Argmax(x.f32() + r * N, N);
              if (std::optional<int64_t> bad = at.GetI64("nonfinite"))
                for (int64_t i = 0; i < N; ++i)
                  if (!std::isfinite(x.f32()[r * N + i])) {
                    ids.i32()[r] = static_cast<int32_t>(*bad);
                    break;
                  }
            } else {
              const int64_t P = In(2).dim(1) / 2;
              const int32_t* pen = In(2).i32() + r * 2 * P;
              ids.i32()[r] = kc::SampleRow(x.f32() + r * N, N, In(1).f32() + r * 8, pen, pen + P, P);
            }
          }
          out.push_back(ids);
        }
        break;
      }
      case OpKind::kConcat:
      case OpKind::kSplit:
      case OpKind::kView: {
        // Generic copies along one axis: [outer, dim, inner] blocks.
        const HostTensor& x0 = In(0);
        const int64_t rank = x0.rank();
        int64_t axis = at.I64Or("axis", 0);
        if (axis < 0) axis += rank;
        if (x0.dtype() != DType::kF32) return OpError(op, "only f32 tensors are supported");
        const int64_t outer = Prod(x0.shape(), 0, axis), inner = Prod(x0.shape(), axis + 1);
        auto copy_block = [&](const HostTensor& src, int64_t src_off, int64_t src_dim, HostTensor& dst, int64_t dst_off,
                              int64_t dst_dim, int64_t len) {
          for (int64_t o = 0; o < outer; ++o)
            std::memcpy(dst.f32() + (o * dst_dim + dst_off) * inner, src.f32() + (o * src_dim + src_off) * inner,
                        static_cast<size_t>(len * inner) * sizeof(float));
        };
        if (op.is(OpKind::kConcat)) {
          int64_t total = 0;
          for (size_t i = 0; i < s.in.size(); ++i) total += In(i).dim(axis);
          llvm::SmallVector<int64_t, 4> shape(x0.shape().begin(), x0.shape().end());
          shape[axis] = total;
          HostTensor y = HostTensor::Zeros(DType::kF32, shape);
          int64_t off = 0;
          for (size_t i = 0; i < s.in.size(); ++i) {
            copy_block(In(i), 0, In(i).dim(axis), y, off, total, In(i).dim(axis));
            off += In(i).dim(axis);
          }
          out.push_back(y);
        } else {
          std::vector<int64_t> sizes = op.is(OpKind::kSplit) ? at.GetI64Array("sizes").value_or(std::vector<int64_t>{})
                                                             : std::vector<int64_t>{at.I64Or("size", 0)};
          int64_t off = op.is(OpKind::kView) ? at.I64Or("offset", 0) : 0;
          for (int64_t sz : sizes) {
            llvm::SmallVector<int64_t, 4> shape(x0.shape().begin(), x0.shape().end());
            shape[axis] = sz;
            HostTensor y = HostTensor::Zeros(DType::kF32, shape);
            copy_block(x0, off, x0.dim(axis), y, 0, sz, sz);
            off += sz;
            out.push_back(y);
          }
        }
        break;
      }
      case OpKind::kReshape: {
        MEMRA_ASSIGN_OR_RETURN(auto shape, Concrete(op.result(0)->shape(), bindings));
        if (Prod(shape) != In(0).numel()) return OpError(op, "reshape changes the element count");
        out.push_back(In(0).Reshaped(shape));
        break;
      }
      case OpKind::kCast: {
        if (at.GetString("dtype").value_or("") != "f32")
          return absl::UnimplementedError(
              absl::StrCat("cpu executor: ", op.Summary(), ": only casts to f32 are supported"));
        MEMRA_RETURN_IF_ERROR(F32In(0));
        out.push_back(In(0));
        break;
      }
      case OpKind::kConstant: {
        MEMRA_ASSIGN_OR_RETURN(auto shape, Concrete(op.result(0)->shape(), bindings));
        const DType dt = op.result(0)->dtype();
        HostTensor y = HostTensor::Zeros(dt == DType::kI32 || dt == DType::kI64 ? dt : DType::kF32, shape);
        const double v = at.F64Or("value", 0);
        if (y.dtype() == DType::kI32)
          std::fill(y.i32(), y.i32() + y.numel(), static_cast<int32_t>(v));
        else if (y.dtype() == DType::kI64)
          std::fill(y.i64(), y.i64() + y.numel(), static_cast<int64_t>(v));
        else
          std::fill(y.f32(), y.f32() + y.numel(), static_cast<float>(v));
        out.push_back(y);
        break;
      }
      case OpKind::kReturn:
        // Arena values are overwritten by the next call: results get storage of their own.
        for (size_t i = 0; i < s.in.size(); ++i) results.push_back(arena ? In(i).Clone() : In(i));
        break;
      case OpKind::kSegment:
        break;
      default:
        // y = f(x) elementwise (ir/Ops.def kUnary): the kernel of kernels/cpu/Elementwise.h's table.
        if (const kc::UnaryKernelFn unary = kc::UnaryKernelFor(op.kind())) {
          MEMRA_RETURN_IF_ERROR(F32In(0));
          const HostTensor& x = In(0);
          HostTensor y = HostTensor::Zeros(DType::kF32, x.shape());
          unary(x.f32(), x.numel(), y.f32());
          out.push_back(y);
        }
        break;
    }
    if (out.size() != s.out.size())
      return absl::InternalError(
          absl::StrCat("cpu executor: ", op.Summary(), ": produced ", out.size(), " results, expected ", s.out.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      const ir::Value* r = op.result(i);
      MEMRA_ASSIGN_OR_RETURN(auto want, Concrete(r->shape(), bindings));
      if (llvm::ArrayRef<int64_t>(want) != out[i].shape())
        return absl::InternalError(absl::StrCat("cpu executor: ", op.Summary(), ": result ", i, " is ",
                                                out[i].ShapeString(), ", its IR type is ", r->type().ToString()));
      if (arena && !op.is(OpKind::kReshape)) MEMRA_RETURN_IF_ERROR(place(out[i], s.out_offsets[i], &op));
      if (observer_ && !r->name().empty()) observer_(*r, out[i]);
      slots[s.out[i]] = std::move(out[i]);
    }
    for (int sl : s.release) slots[sl] = HostTensor();
    if (options_.profile) {
      ProfileEntry& e = profile_[{fn.name(), std::string(op.mnemonic())}];
      e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - op_t0).count();
      ++e.count;
    }
  }
  if (options_.profile) {
    ProfileEntry& e = profile_calls_[fn.name()];
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - call_t0).count();
    ++e.count;
  }
  return results;
}

std::string CpuExecutor::ProfileReport() const {
  std::string out;
  for (const auto& [fn, call] : profile_calls_) {
    absl::StrAppend(&out, absl::StrFormat("profile @%s: %d calls, %.3f s (%.2f ms/call)\n", fn, call.count,
                                          call.seconds, 1e3 * call.seconds / std::max<int64_t>(call.count, 1)));
    std::vector<std::pair<std::string, ProfileEntry>> rows;
    for (const auto& [key, e] : profile_)
      if (key.first == fn) rows.emplace_back(key.second, e);
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    for (const auto& [kind, e] : rows)
      absl::StrAppend(&out, absl::StrFormat("  %-18s %8d ops %9.3f s %5.1f%%\n", kind, e.count, e.seconds,
                                            100.0 * e.seconds / std::max(call.seconds, 1e-12)));
  }
  return out;
}

}  // namespace memra::runtime
