// Per-op-kind signature checks and result type inference: the single source of the dtype/shape
// rules of every op kind. The builder uses it to type new ops, the verifier to check them.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/Attribute.h"
#include "ir/OpKind.h"
#include "ir/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace memra::ir {

// Arity, operand roles (activation / weight / state, and the state kind an op expects) and the
// attribute schema (required attributes present, schema attributes of the right kind).
absl::Status CheckSignature(OpKind kind, llvm::ArrayRef<Value*> operands, const AttrDict& attrs);

// Result types of an op with these operands and attributes; error messages name the operand and
// the rule. For kExplicitType ops `declared` holds the result types to validate and return.
// Assumes CheckSignature passed.
absl::StatusOr<llvm::SmallVector<TensorType, 2>> InferResultTypes(OpKind kind, llvm::ArrayRef<Value*> operands,
                                                                  const AttrDict& attrs,
                                                                  llvm::ArrayRef<TensorType> declared = {});

// qk_norm_rope_append's domain (ir/Ops.def): a head row one warp holds (head_dim a multiple of 32 up
// to 512) and every rotated pair within one lane (n_rot a multiple of 64). fuse-qk-norm-rope-append
// forms the op only inside it.
bool InQkNormRopeAppendDomain(int64_t head_dim, int64_t n_rot);

// The weight types the one-token GEMV (kernels/cuda/Gemv.cu) streams as stored: f32, f16, bf16.
// moe_router takes only these (fuse-moe-router).
bool IsFloatWeight(DType d);

}  // namespace memra::ir
