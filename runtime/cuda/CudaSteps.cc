// EnqueueStep: the device work of one op of a CUDA executor program. The op's unit
// (kernels/cuda/GpuOp.h) binds its selection to device addresses; this file only issues what it
// returns (kernel calls with their parameter blocks, cuBLASLt products, copies) and knows no op.
#include <string>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaExecutorImpl.h"

namespace memra::runtime {
namespace {

// What a unit's Bind sees of the program: arena slots, state buffers, weights and the call's shapes.
class StepBinder : public kcu::BindContext {
 public:
  using Weights = absl::flat_hash_map<const ir::Value*, std::unique_ptr<CudaExecutor::DeviceWeight>>;
  using States = absl::flat_hash_map<const ir::Value*, std::unique_ptr<cuda::DeviceBuffer>>;
  StepBinder(const CudaExecutor::Program& p, const Step& s, const Weights& weights, const States& states,
             const ir::SymbolBindings& bindings, uint64_t workspace)
      : BindContext(*s.op, s.selection, s.shapes),
        p_(p),
        s_(s),
        weights_(weights),
        states_(states),
        bindings_(bindings),
        workspace_(workspace) {}

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

 private:
  const CudaExecutor::Program& p_;
  const Step& s_;
  const Weights& weights_;
  const States& states_;
  const ir::SymbolBindings& bindings_;
  uint64_t workspace_;
};

}  // namespace

absl::Status CudaExecutor::EnqueueStep(Program& p, size_t step_index, const ir::SymbolBindings& bindings,
                                       std::pair<double, double>* work) {
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  const Step& s = p.steps[step_index];
  const Op& op = *s.op;
  step_work_.Clear();
  MEMRA_RETURN_IF_ERROR(
      s.impl->Bind(StepBinder(p, s, weights_, state_, bindings, workspace_ ? workspace_->ptr() : 0), step_work_));
  for (const kcu::DeviceAction& action : step_work_.actions()) {
    if (const auto* k = std::get_if<kcu::KernelCall>(&action)) {
      if (k->launch >= s.launches.size())
        return OpError(op,
                       absl::StrCat("unit ", s.impl->name(), " issued launch ", k->launch, " of ", s.launches.size()));
      const ResolvedLaunch& l = s.launches[k->launch];
      void* args[] = {const_cast<unsigned char*>(k->params.bytes.data())};
      const cuda::CUresult r =
          cuda::LaunchKernel(d, l.fn, l.spec.grid, l.spec.block, l.spec.smem, stream, args, programmatic_launch_);
      if (r != 0)
        return absl::InternalError(absl::StrCat("cuda executor: ", op.Summary(), ": launch of ",
                                                l.spec.kernel.ToString(), " (grid ", l.spec.grid, ", block ",
                                                l.spec.block, "): ", d.ErrorText(r)));
    } else if (const auto* g = std::get_if<kcu::GemmCall>(&action)) {
      absl::Status st = blas_->Matmul(g->x, g->w, g->y, g->m, g->n, g->k, g->w_dtype, stream);
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", op.Summary(), ": ", st.message()));
    } else if (const auto* c = std::get_if<kcu::CopyCall>(&action)) {
      MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoDAsync(c->dst, c->src, c->bytes, stream),
                                    absl::StrCat("cuda executor: ", op.Summary(), ": copy")));
    }
  }
  work->first += step_work_.flops();
  work->second += step_work_.weight_bytes();
  return absl::OkStatus();
}

}  // namespace memra::runtime
