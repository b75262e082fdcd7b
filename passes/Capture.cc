#include "passes/Capture.h"

#include "absl/strings/str_cat.h"

namespace memra::passes {
namespace {

using ir::OpKind;

// The per-kind table.
CaptureVerdict ByKind(OpKind kind) {
  switch (kind) {
    // Device compute on device data with shapes fixed by the bucket.
    case OpKind::kEmbed:
    case OpKind::kRmsNorm:
    case OpKind::kL2Norm:
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kScale:
    case OpKind::kMulWeight:
    case OpKind::kMulRows:
    case OpKind::kSigmoid:
    case OpKind::kSilu:
    case OpKind::kSoftplus:
    case OpKind::kExp:
    case OpKind::kGelu:
    case OpKind::kTanh:
    case OpKind::kSwiglu:
    case OpKind::kSoftmax:
    case OpKind::kMatMul:
    case OpKind::kMatMulGroup:
    case OpKind::kQGateSplit:
    case OpKind::kRope:
    case OpKind::kConv1dCausal:
    case OpKind::kDeltaNetGates:
    case OpKind::kGatedDeltaScan:
    case OpKind::kDeltaNetStep:
    case OpKind::kMatMulDeltaNetStep:
    case OpKind::kGatedRmsNorm:
    case OpKind::kAddRmsNorm:
    case OpKind::kAddRmsNormMatMul:
    case OpKind::kMatMulAddRmsNorm:
    case OpKind::kFusedRows:
    case OpKind::kMatMulSwiglu:
    case OpKind::kQkNormRope:
    case OpKind::kTakeLastRow:
    case OpKind::kTopK:
    case OpKind::kMoeRoute:
    case OpKind::kMoeRouteSigmoid:
    case OpKind::kMoeRouter:
    case OpKind::kMoeExperts:
    case OpKind::kGatedAdd:
    case OpKind::kMoeFfn:
    case OpKind::kMoeFfnUngated:
    case OpKind::kArgmax:
    // The draw u and the parameters are per-row inputs (uploaded with the step), not host state.
    case OpKind::kSample:
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kReshape:
    case OpKind::kView:
    case OpKind::kCast:
    case OpKind::kConstant:
      return {};
    // The position counter is a device counter: positions reads it, advance_positions adds T on
    // the device (the host mirror is updated by the runtime after the launch).
    case OpKind::kPositions:
    case OpKind::kAdvancePositions:
    // The append's rows come from device positions; the context-overflow check runs on the host
    // before the launch.
    case OpKind::kKvAppend:
    case OpKind::kQkNormRopeAppend:
    // Sequences: the batch descriptor and the block table live in device memory (uploaded
    // before the step), so a step's graph replays for any batch of its bucket.
    case OpKind::kSeqPositions:
    case OpKind::kSeqAdvancePositions:
    case OpKind::kPagedKvAppend:
    case OpKind::kSeqConv1dCausal:
    case OpKind::kSeqGatedDeltaScan:
    case OpKind::kTakeSeqLastRows:
    // NCCL's collectives are stream work a graph captures (docs/design/tensor-parallel.md).
    case OpKind::kAllReduce:
    case OpKind::kAllGather:
    // Its grid covers every position a slot can hold; rows past their length exit early.
    case OpKind::kPagedAttention:
      return {};
    case OpKind::kAttention:
    case OpKind::kAttentionGated:
    // Its append, like kv_append's, is checked against the context on the host before the launch.
    case OpKind::kGatedAttentionStep:
      return {true, "", /*kv_rung=*/true};
    case OpKind::kReturn:
      return {false, "host sync: the results are copied to the host"};
    case OpKind::kSegment:
      return {false, "a segment is a grouping, not an op"};
  }
  return {false, "unknown op kind"};
}

}  // namespace

CaptureVerdict ClassifyForCapture(const ir::Op& op, bool require_arena) {
  CaptureVerdict v = ByKind(op.kind());
  if (!v.capturable) return v;
  for (const ir::Value* r : op.results())
    if (!r->shape().IsStatic())
      return {false, absl::StrCat("data-dependent shape: %", r->name().empty() ? "?" : r->name(), " is ",
                                  r->type().ToString(), " (run bucket-shapes)")};
  for (const ir::Value* x : op.operands())
    if (x && !x->is_global() && !x->shape().IsStatic())
      return {false, absl::StrCat("data-dependent shape: operand %", x->name().empty() ? "?" : x->name(), " is ",
                                  x->type().ToString(), " (run bucket-shapes)")};
  if (require_arena && op.num_results() > 0 && !op.attrs().Has("arena"))
    return {false, "allocation: the results have no arena offset (run plan-memory)"};
  return v;
}

}  // namespace memra::passes
