// EnqueueStep: the device work of one op of a CUDA executor program. The op's unit
// (kernels/cuda/GpuOp.h) binds its selection to device addresses; this file only issues what it
// returns (kernel calls with their parameter blocks, cuBLASLt products, copies) and knows no op.
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/gguf/TensorName.h"
#include "ir/DType.h"
#include "ir/StatusMacros.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaExecutorImpl.h"
#include "runtime/cuda/Nccl.h"

namespace memra::runtime {
namespace {

// What a unit's Bind sees of the program: arena slots, state buffers, weights and the call's shapes.
class StepBinder : public kcu::BindContext {
 public:
  using Weights = absl::flat_hash_map<const ir::Value*, std::unique_ptr<CudaExecutor::DeviceWeight>>;
  using States = absl::flat_hash_map<const ir::Value*, std::unique_ptr<cuda::DeviceBuffer>>;
  StepBinder(const CudaExecutor::Program& p, const Step& s, const Weights& weights, const States& states,
             const ir::SymbolBindings& bindings, uint64_t workspace, int tp_rank, int tp_size)
      : BindContext(*s.op, s.selection, s.shapes),
        p_(p),
        s_(s),
        weights_(weights),
        states_(states),
        bindings_(bindings),
        workspace_(workspace),
        tp_rank_(tp_rank),
        tp_size_(tp_size) {}

  absl::StatusOr<llvm::SmallVector<int64_t, 4>> Shape(const ir::Value* v) const override {
    return ConcreteShape(v, bindings_);
  }
  uint64_t In(unsigned i) const override {
    const ir::Value* v = op().operand(i);
    if (v->kind() == ir::Value::Kind::kState) return states_.at(v)->ptr();
    if (v->kind() == ir::Value::Kind::kWeight) {
      const CudaExecutor::DeviceWeight& w = *weights_.at(v);
      return ir::IsMatrixOperand(op(), i) && w.matrix.ptr() != 0 ? w.matrix.ptr() : w.values.ptr();
    }
    return p_.Ptr(v);
  }
  absl::StatusOr<kcu::DeviceMatrix> Matrix(unsigned i) const override {
    const ir::Value* v = op().operand(i);
    auto it = weights_.find(v);
    if (!ir::IsMatrixOperand(op(), i) || it == weights_.end() || it->second->layout == nullptr)
      return OpError(op(), absl::StrCat("operand ", i, " is not a weight matrix on the device"));
    return it->second->AsMatrix();
  }
  uint64_t Out(unsigned i) const override { return p_.Ptr(op().result(i)); }
  uint64_t Scratch() const override { return s_.scratch_offset >= 0 ? p_.arena.ptr() + s_.scratch_offset : 0; }
  uint64_t Workspace() const override { return s_.selection.workspace_bytes > 0 ? workspace_ : 0; }
  uint64_t Tickets() const override { return s_.tickets_offset >= 0 ? p_.arena.ptr() + s_.tickets_offset : 0; }
  int tp_rank() const override { return tp_rank_; }
  int tp_size() const override { return tp_size_; }

 private:
  const CudaExecutor::Program& p_;
  const Step& s_;
  const Weights& weights_;
  const States& states_;
  const ir::SymbolBindings& bindings_;
  uint64_t workspace_;
  int tp_rank_, tp_size_;
};

// Bytes a step moves besides what its kernels count (weights of the products): every activation
// operand and result at the bucket's shapes, the weights of ops whose kernels count none (norm
// and bias vectors), and a one-sequence recurrent state read and written. KV reads depend on the
// position on the device and are not counted (attention shows its activations only), nor is a
// slotted state (only the entries' slots are touched).
double ActivationBytes(const Op& op, const ir::SymbolBindings& bindings, bool weights_counted) {
  auto bytes_of = [&](const ir::Value* v) {
    const std::optional<int64_t> n = v->type().shape.NumElements(bindings);
    return n ? static_cast<double>(ir::StorageBytes(v->type().dtype, *n).value_or(0)) : 0.0;
  };
  double bytes = 0;
  for (const ir::Value* v : op.operands()) {
    if (const auto* s = llvm::dyn_cast<ir::StateVar>(v)) {
      const bool recurrent = s->state_kind() == ir::StateKind::kConv || s->state_kind() == ir::StateKind::kDelta;
      if (recurrent && !absl::StartsWith(op.mnemonic(), "seq_")) bytes += 2 * bytes_of(v);
    } else if (llvm::isa<ir::Weight>(v)) {
      if (!weights_counted) bytes += bytes_of(v);
    } else {
      bytes += bytes_of(v);
    }
  }
  for (const ir::Value* v : op.results()) bytes += bytes_of(v);
  return bytes;
}

// A tensor name past its `blk.N.` prefix (the name itself when it has none).
absl::string_view WithoutLayerPrefix(absl::string_view name) {
  const std::optional<gguf::LayerTensorName> l = gguf::ParseLayerTensorName(name);
  return l ? l->rest : name;
}

}  // namespace

absl::Status CudaExecutor::EnqueueStep(Program& p, size_t step_index, const ir::SymbolBindings& bindings,
                                       std::pair<double, double>* work) {
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  const Step& s = p.steps[step_index];
  const Op& op = *s.op;
  step_work_.Clear();
  MEMRA_RETURN_IF_ERROR(s.impl->Bind(StepBinder(p, s, weights_, state_, bindings, workspace_ ? workspace_->ptr() : 0,
                                                options_.tp_rank, options_.tp_size),
                                     step_work_));
  const auto skipped = [&](absl::string_view name) {
    if (absl::c_find(options_.skip_ops, name) == options_.skip_ops.end()) return false;
    graph_stats_.skip_matched.insert(std::string(name));
    return true;
  };
  // Every name is looked up (no short circuit), so each one given is recorded as matched. A weight
  // operand matches by its name and by its name past the layer prefix (`ffn_down.weight` names
  // every layer's), so one product among several of a kind can be left out (`output.weight`).
  bool skip_op = false;
  if (!options_.skip_ops.empty()) {
    skip_op = skipped(op.mnemonic()) | skipped(s.impl->name());
    for (const ir::Value* v : op.operands())
      if (v->kind() == ir::Value::Kind::kWeight) skip_op |= skipped(v->name()) | skipped(WithoutLayerPrefix(v->name()));
  }
  for (const kcu::DeviceAction& action : step_work_.actions()) {
    if (const auto* k = std::get_if<kcu::KernelCall>(&action)) {
      if (k->launch >= s.launches.size())
        return OpError(op,
                       absl::StrCat("unit ", s.impl->name(), " issued launch ", k->launch, " of ", s.launches.size()));
      const ResolvedLaunch& l = s.launches[k->launch];
      if ((!options_.skip_ops.empty() && skipped(l.spec.kernel.entry)) || skip_op) {
        ++graph_stats_.skipped_actions;
        continue;
      }
      void* args[] = {const_cast<unsigned char*>(k->params.bytes.data())};
      const cuda::CUresult r = cuda::LaunchKernel(d, l.fn, l.spec.grid, l.spec.block, l.spec.smem, stream, args,
                                                  programmatic_launch_, l.spec.cluster);
      if (r != 0)
        return absl::InternalError(absl::StrCat("cuda executor: ", op.Summary(), ": launch of ",
                                                l.spec.kernel.ToString(), " (grid ", l.spec.grid, ", block ",
                                                l.spec.block, "): ", d.ErrorText(r)));
    } else if (skip_op) {
      ++graph_stats_.skipped_actions;
      continue;
    } else if (const auto* g = std::get_if<kcu::GemmCall>(&action)) {
      absl::Status st = blas_->Matmul(g->x, g->w, g->y, g->m, g->n, g->k, g->w_dtype, stream);
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", op.Summary(), ": ", st.message()));
    } else if (const auto* c = std::get_if<kcu::CopyCall>(&action)) {
      MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoDAsync(c->dst, c->src, c->bytes, stream),
                                    absl::StrCat("cuda executor: ", op.Summary(), ": copy")));
    } else if (const auto* col = std::get_if<kcu::CollectiveCall>(&action)) {
      absl::Status st;
      if (comm_ != nullptr) {
        st = col->kind == kcu::CollectiveCall::kAllReduceSum
                 ? comm_->AllReduceSum(col->send, col->recv, col->count, stream)
                 : comm_->AllGather(col->send, col->recv, col->count, stream);
      } else if (options_.tp_size > 1) {
        st = absl::FailedPreconditionError("rank of a tensor-parallel group without a communicator");
      } else {
        // One rank: the sum of one part, the gather of one part.
        st = CuCheck(d.cuMemcpyDtoDAsync(col->recv, col->send, col->count * 4, stream), "copy");
      }
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", op.Summary(), ": ", st.message()));
    }
  }
  work->first += step_work_.flops();
  work->second += step_work_.weight_bytes();
  if (options_.profile) work->second += ActivationBytes(op, bindings, step_work_.weight_bytes() > 0);
  return absl::OkStatus();
}

}  // namespace memra::runtime
