// EnqueueStep: the device work of one op of a CUDA executor program (kernel launches with their
// arguments, cuBLASLt products, copies), per op kind. Selection and geometry are codegen/KernelSelect's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/KernelSelect.h"
#include "ir/StatusMacros.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaExecutorImpl.h"

namespace memra::runtime {

absl::Status CudaExecutor::EnqueueStep(Program& p, size_t step_index, const ir::SymbolBindings& bindings,
                                       std::pair<double, double>* work) {
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  auto concrete = [&](const ir::Value* v) { return ConcreteShape(v, bindings); };
  const Step& s = p.steps[step_index];
  const Op& op = *s.op;
  const ir::AttrDict& at = op.attrs();
  auto In = [&](unsigned i) -> CUdeviceptr {
    const ir::Value* v = op.operand(i);
    if (v->kind() == ir::Value::Kind::kState) return state_.at(v)->ptr();
    if (v->kind() == ir::Value::Kind::kWeight) {
      const DeviceWeight& w = *weights_.at(v);
      return w.matrix.ptr() != 0 && (op.is(OpKind::kMatMul) || op.is(OpKind::kMatMulGroup) || op.is(OpKind::kEmbed))
                 ? w.matrix.ptr()
                 : w.values.ptr();
    }
    return p.Ptr(v);
  };
  auto Out = [&](unsigned i) { return p.Ptr(op.result(i)); };
  auto launch = [&](size_t li, KernelArgs& a) -> absl::Status {
    const ResolvedLaunch& l = s.launches[li];
    const cuda::CUresult r = d.cuLaunchKernel(l.fn, l.spec.grid, 1, 1, l.spec.block, 1, 1, l.spec.smem, stream,
                                              a.ptrs(), nullptr);
    if (r != 0)
      return absl::InternalError(absl::StrCat("cuda executor: ", op.Summary(), ": launch of ", l.spec.kernel.ToString(),
                                              " (grid ", l.spec.grid, ", block ", l.spec.block, "): ", d.ErrorText(r)));
    return absl::OkStatus();
  };
  llvm::SmallVector<int64_t, 4> x0;
  if (op.num_operands() > 0) {
    MEMRA_ASSIGN_OR_RETURN(x0, concrete(op.operand(0)));
  }
  const int64_t n0 = Numel(x0);
  const int64_t cols0 = x0.empty() ? 1 : x0.back();
  const int64_t rows0 = n0 / std::max<int64_t>(cols0, 1);
  const float eps = static_cast<float>(at.F64Or("eps", 0));
  if (s.gemv) {
    // One token: Gemv.cu per weight (matmul_swiglu: one fused gate/up launch).
    auto wptr = [&](unsigned i) {
      const DeviceWeight& w = *weights_.at(op.operand(i));
      return std::make_pair(w.q8.ptr() != 0 ? w.q8.ptr() : w.matrix.ptr(), w.q8_scales.ptr());
    };
    for (unsigned i = 1; i < op.num_operands(); ++i) {
      const DeviceWeight& w = *weights_.at(op.operand(i));
      if (w.cols != cols0) return OpError(op, "K mismatch");
      work->first += 2.0 * w.rows * w.cols;
      work->second += static_cast<double>(w.q8.ptr() != 0 ? w.q8.bytes() + w.q8_scales.bytes() : w.matrix.bytes());
    }
    if (op.is(OpKind::kMatMulSwiglu)) {
      const auto [wg, sg] = wptr(1);
      const auto [wu, su] = wptr(2);
      KernelArgs a;
      a.Add(wg).Add(sg).Add(wu).Add(su).Add(In(0)).Add(Out(0)).Add(static_cast<int>(weights_.at(op.operand(1))->rows));
      return launch(0, a);
    }
    if (s.launches.size() == 1 && s.launches[0].spec.kernel.entry == "gemv_group") {
      KernelArgs a;
      for (unsigned i = 1; i <= 4; ++i) {
        const bool used = i < op.num_operands();
        const auto [wv, sv] = used ? wptr(i) : std::make_pair(CUdeviceptr{0}, CUdeviceptr{0});
        a.Add(wv).Add(sv).Add(used ? Out(i - 1) : CUdeviceptr{0});
      }
      a.Add(In(0));
      for (unsigned i = 1; i <= 4; ++i)
        a.Add(static_cast<int>(i < op.num_operands() ? weights_.at(op.operand(i))->rows : 0));
      return launch(0, a);
    }
    for (unsigned i = 1; i < op.num_operands(); ++i) {
      const auto [wv, sv] = wptr(i);
      KernelArgs a;
      a.Add(wv).Add(sv).Add(In(0)).Add(Out(i - 1)).Add(static_cast<int>(weights_.at(op.operand(i))->rows));
      MEMRA_RETURN_IF_ERROR(launch(i - 1, a));
    }
    return absl::OkStatus();
  }
  switch (op.kind()) {
    case OpKind::kEmbed: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(static_cast<int>(n0));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kRmsNorm: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kL2Norm: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kGatedRmsNorm: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(Out(0)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAddRmsNorm: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(Out(0)).Add(Out(1)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kSoftmax:
    case OpKind::kArgmax: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(rows0);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAdd:
    case OpKind::kMul: {
      MEMRA_ASSIGN_OR_RETURN(auto bshape, concrete(op.operand(1)));
      const int64_t nb = Numel(bshape);
      if (nb == 0 || n0 % nb != 0) return OpError(op, "broadcast operand does not divide the first");
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(n0).Add(nb);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kScale: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(n0).Add(static_cast<float>(at.F64Or("factor", 1.0)));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kSigmoid:
    case OpKind::kSilu:
    case OpKind::kSoftplus:
    case OpKind::kExp: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(n0);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kSwiglu: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(n0);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kMatMul:
    case OpKind::kMatMulGroup: {
      const CUdeviceptr scratch = s.scratch_offset >= 0 ? p.arena.ptr() + s.scratch_offset : 0;
      DType cast_type = DType::kF32;
      for (unsigned i = 1; i < op.num_operands(); ++i) {
        const DeviceWeight& w = *weights_.at(op.operand(i));
        if (w.cols != cols0) return OpError(op, "K mismatch");
        CUdeviceptr xin = In(0);
        if (w.matrix_dtype != DType::kF32) {
          if (cast_type != w.matrix_dtype) {
            // The launch for this 16-bit type (SelectKernels emits one per distinct type).
            size_t li = 0;
            for (; li < s.launches.size(); ++li)
              if (s.launches[li].spec.kernel.entry == (w.matrix_dtype == DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16")) break;
            if (li == s.launches.size()) return OpError(op, "no activation cast selected");
            KernelArgs a;
            a.Add(In(0)).Add(scratch).Add(n0);
            MEMRA_RETURN_IF_ERROR(launch(li, a));
            cast_type = w.matrix_dtype;
          }
          xin = scratch;
        }
        work->first += 2.0 * rows0 * w.rows * w.cols;
        work->second += static_cast<double>(w.matrix.bytes());
        absl::Status st = blas_->Matmul(xin, w.matrix.ptr(), Out(i - 1), rows0, w.rows, w.cols, w.matrix_dtype, stream);
        if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", op.Summary(), ": ", st.message()));
      }
      break;
    }
    case OpKind::kMatMulSwiglu: {
      // gate product into the scratch, up product into y, then y = silu(gate) * y in place.
      const CUdeviceptr scratch = s.scratch_offset >= 0 ? p.arena.ptr() + s.scratch_offset : 0;
      const CUdeviceptr gate = p.arena.ptr() + s.aux_offset;
      DType cast_type = DType::kF32;
      int64_t n_out = 0;
      for (unsigned i = 1; i <= 2; ++i) {
        const DeviceWeight& w = *weights_.at(op.operand(i));
        if (w.cols != cols0) return OpError(op, "K mismatch");
        CUdeviceptr xin = In(0);
        if (w.matrix_dtype != DType::kF32) {
          if (cast_type != w.matrix_dtype) {
            size_t li = 0;
            for (; li + 1 < s.launches.size(); ++li)
              if (s.launches[li].spec.kernel.entry == (w.matrix_dtype == DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16")) break;
            if (li + 1 >= s.launches.size()) return OpError(op, "no activation cast selected");
            KernelArgs a;
            a.Add(In(0)).Add(scratch).Add(n0);
            MEMRA_RETURN_IF_ERROR(launch(li, a));
            cast_type = w.matrix_dtype;
          }
          xin = scratch;
        }
        n_out = rows0 * w.rows;
        work->first += 2.0 * rows0 * w.rows * w.cols;
        work->second += static_cast<double>(w.matrix.bytes());
        absl::Status st = blas_->Matmul(xin, w.matrix.ptr(), i == 1 ? gate : Out(0), rows0, w.rows, w.cols,
                                        w.matrix_dtype, stream);
        if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", op.Summary(), ": ", st.message()));
      }
      KernelArgs a;
      a.Add(gate).Add(Out(0)).Add(Out(0)).Add(n_out);
      MEMRA_RETURN_IF_ERROR(launch(s.launches.size() - 1, a));
      break;
    }
    case OpKind::kQkNormRope: {
      // Per head: rms_norm into the scratch, rope from it into the result (q, then k).
      const CUdeviceptr tmp = p.arena.ptr() + s.aux_offset;
      const int64_t n_rot = at.I64Or("n_rot", 0);
      const float base = static_cast<float>(at.F64Or("base", 10000.0));
      const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
      for (unsigned i = 0; i < 2; ++i) {
        MEMRA_ASSIGN_OR_RETURN(auto xs, concrete(op.operand(i)));
        KernelArgs a;
        a.Add(In(i)).Add(In(2 + i)).Add(tmp).Add(xs[0] * xs[1]).Add(eps);
        MEMRA_RETURN_IF_ERROR(launch(2 * i, a));
        KernelArgs r;
        r.Add(tmp).Add(Out(i)).Add(In(4)).Add(static_cast<int>(xs[0])).Add(theta_scale);
        MEMRA_RETURN_IF_ERROR(launch(2 * i + 1, r));
      }
      break;
    }
    case OpKind::kQGateSplit: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(Out(1)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kRope: {
      const int64_t n_rot = at.I64Or("n_rot", 0);
      const float base = static_cast<float>(at.F64Or("base", 10000.0));
      const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(In(1)).Add(static_cast<int>(x0[0])).Add(theta_scale);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kPositions: {
      MEMRA_ASSIGN_OR_RETURN(auto like, concrete(op.operand(1)));
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(static_cast<int>(like[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAdvancePositions: {
      MEMRA_ASSIGN_OR_RETURN(auto like, concrete(op.operand(1)));
      KernelArgs a;
      a.Add(In(0)).Add(static_cast<int>(like[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kKvAppend: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(In(4)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAttention:
    case OpKind::kAttentionGated: {
      const float scale = static_cast<float>(at.F64Or("scale", 1.0));
      size_t next = 1;
      if (s.launches[0].spec.kernel.entry == "attention_split") {
        // Decode: partials per key range into the step's scratch, then the merge into o.
        const CUdeviceptr part = p.arena.ptr() + s.aux_offset;
        KernelArgs a;
        a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(part).Add(scale);
        MEMRA_RETURN_IF_ERROR(launch(0, a));
        KernelArgs c;
        c.Add(part).Add(Out(0));
        MEMRA_RETURN_IF_ERROR(launch(1, c));
        next = 2;
      } else {
        KernelArgs a;
        a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(Out(0)).Add(static_cast<int>(x0[0])).Add(scale);
        MEMRA_RETURN_IF_ERROR(launch(0, a));
      }
      if (op.is(OpKind::kAttentionGated)) {
        KernelArgs g;
        g.Add(Out(0)).Add(In(4)).Add(Out(0)).Add(n0);
        MEMRA_RETURN_IF_ERROR(launch(next, g));
      }
      break;
    }
    case OpKind::kConv1dCausal: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(Out(0)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      if (s.launches.size() == 2) {  // conv1d_causal_tokens, then the state update
        KernelArgs u;
        u.Add(In(0)).Add(In(2)).Add(static_cast<int>(x0[0]));
        MEMRA_RETURN_IF_ERROR(launch(1, u));
      }
      break;
    }
    case OpKind::kDeltaNetGates: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(Out(0)).Add(Out(1)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kGatedDeltaScan: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(In(4)).Add(In(5)).Add(Out(0))
          .Add(static_cast<int>(x0[0])).Add(static_cast<float>(at.F64Or("scale", 1.0)));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kView: {
      int64_t axis = at.I64Or("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(x0.size());
      auto prod = [](llvm::ArrayRef<int64_t> s, size_t from, size_t to) {
        int64_t n = 1;
        for (size_t i = from; i < std::min(to, s.size()); ++i) n *= s[i];
        return n;
      };
      const int64_t outer = prod(x0, 0, axis);
      const int64_t inner = prod(x0, axis + 1, SIZE_MAX);
      if (ElemBytes(op.operand(0)->dtype()) != 4) return OpError(op, "only 4-byte elements are supported");
      if (op.is(OpKind::kConcat)) {
        int64_t total = 0;
        std::vector<int64_t> lens;
        for (unsigned i = 0; i < op.num_operands(); ++i) {
          MEMRA_ASSIGN_OR_RETURN(auto si, concrete(op.operand(i)));
          lens.push_back(si[axis]);
          total += si[axis];
        }
        int64_t off = 0;
        for (unsigned i = 0; i < op.num_operands(); ++i) {
          KernelArgs a;
          a.Add(In(i)).Add(Out(0)).Add(outer).Add(lens[i]).Add(int64_t{0}).Add(total).Add(off).Add(lens[i]).Add(inner);
          MEMRA_RETURN_IF_ERROR(launch(i, a));
          off += lens[i];
        }
      } else {
        std::vector<int64_t> sizes = op.is(OpKind::kSplit) ? at.GetI64Array("sizes").value_or(std::vector<int64_t>{})
                                                            : std::vector<int64_t>{at.I64Or("size", 0)};
        int64_t off = op.is(OpKind::kView) ? at.I64Or("offset", 0) : 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
          KernelArgs a;
          a.Add(In(0)).Add(Out(static_cast<unsigned>(i))).Add(outer).Add(x0[axis]).Add(off).Add(sizes[i])
              .Add(int64_t{0}).Add(sizes[i]).Add(inner);
          MEMRA_RETURN_IF_ERROR(launch(i, a));
          off += sizes[i];
        }
      }
      break;
    }
    case OpKind::kTakeLastRow: {
      const int64_t row_bytes = (n0 / std::max<int64_t>(x0[0], 1)) * ElemBytes(op.operand(0)->dtype());
      MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoDAsync(Out(0), In(0) + (x0[0] - 1) * row_bytes, row_bytes, stream),
                                    absl::StrCat("cuda executor: ", op.Summary(), ": copy")));
      break;
    }
    case OpKind::kConstant: {
      MEMRA_ASSIGN_OR_RETURN(auto shape, concrete(op.result(0)));
      KernelArgs a;
      a.Add(Out(0)).Add(Numel(shape));
      if (op.result(0)->dtype() == DType::kI32) a.Add(static_cast<int>(at.F64Or("value", 0)));
      else a.Add(static_cast<float>(at.F64Or("value", 0)));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kReshape:
    case OpKind::kCast:
    case OpKind::kSegment:
      break;
    case OpKind::kReturn:  // the results are downloaded by Run
      break;
    case OpKind::kTopK:
    case OpKind::kSample:
      return OpError(op, "not implemented on the GPU");
    default:
      return OpError(op, "no CUDA implementation for this op yet");
  }
  return absl::OkStatus();
}

}  // namespace memra::runtime
