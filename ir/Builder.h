// OpBuilder: creates typed ops at an insertion point. Result types are inferred from the
// operands and attributes (ir/TypeInference.h), so building a layer reads like the model:
//
//   OpBuilder b(func);
//   Value* h = b.RmsNorm(x, m.weight("blk.0.attn_norm.weight"), 1e-6);
//   Value* qkv = b.MatMul(h, m.weight("blk.0.attn_qkv.weight"))->Named("qkv0");
//   auto [q, gate] = b.QGateSplit(qg, /*n_head=*/4, /*head_dim=*/64);
//   ...
//   MEMRA_RETURN_IF_ERROR(b.status());
//
// Errors are sticky: the first failing op records its error (naming the op and the rule) in
// status() and returns a poison value; ops built from poison values are skipped silently, so a
// lowering checks status() once per layer or function instead of after every op.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/TypeInference.h"

namespace memra::ir {

class OpBuilder {
 public:
  // Appends at the end of the function body (before nothing: add the return last).
  explicit OpBuilder(Function* f);
  // Inserts into `block` before `pos`.
  OpBuilder(Block* block, Block::iterator pos);

  void SetInsertionPointToEnd(Block* block);
  void SetInsertionPoint(Op* before);
  void SetInsertionPointAfter(Op* op);

  // First error of any op built so far (OK if none).
  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // The op that created the last value returned (nullptr after an error).
  Op* last_op() const { return last_op_; }

  // Generic creation: checks the signature, infers result types (`explicit_types` for
  // reshape/constant), inserts. Returns the op or an error (does not touch status()).
  absl::StatusOr<Op*> Create(OpKind kind, llvm::ArrayRef<Value*> operands, AttrDict attrs = {},
                             llvm::ArrayRef<TensorType> explicit_types = {});
  // The same with sticky errors: the op's results (poison values on error).
  llvm::SmallVector<Value*, 2> Build(OpKind kind, llvm::ArrayRef<Value*> operands, AttrDict attrs = {},
                                     llvm::ArrayRef<TensorType> explicit_types = {});
  // Single-result form of Build.
  Value* Build1(OpKind kind, llvm::ArrayRef<Value*> operands, AttrDict attrs = {},
                llvm::ArrayRef<TensorType> explicit_types = {});

  // Typed helpers, one per op kind (semantics in ir/Ops.def).
  Value* Embed(Value* ids, Value* table) { return Build1(OpKind::kEmbed, {ids, table}); }
  // w null: no weight.
  Value* RmsNorm(Value* x, Value* w, double eps) {
    if (w == nullptr) return Build1(OpKind::kRmsNorm, {x}, {{"eps", eps}});
    return Build1(OpKind::kRmsNorm, {x, w}, {{"eps", eps}});
  }
  Value* L2Norm(Value* x, double eps) { return Build1(OpKind::kL2Norm, {x}, {{"eps", eps}}); }
  Value* Add(Value* a, Value* b) { return Build1(OpKind::kAdd, {a, b}); }
  Value* Mul(Value* a, Value* b) { return Build1(OpKind::kMul, {a, b}); }
  Value* MulRows(Value* x, Value* s) { return Build1(OpKind::kMulRows, {x, s}); }
  Value* Scale(Value* x, double factor) { return Build1(OpKind::kScale, {x}, {{"factor", factor}}); }
  Value* Sigmoid(Value* x) { return Build1(OpKind::kSigmoid, {x}); }
  Value* Silu(Value* x) { return Build1(OpKind::kSilu, {x}); }
  Value* Gelu(Value* x) { return Build1(OpKind::kGelu, {x}); }
  Value* Tanh(Value* x) { return Build1(OpKind::kTanh, {x}); }
  Value* Softplus(Value* x) { return Build1(OpKind::kSoftplus, {x}); }
  Value* Exp(Value* x) { return Build1(OpKind::kExp, {x}); }
  // clamp > 0: the clamped SwiGLU (ir/Ops.def; the attribute written only when set).
  Value* Swiglu(Value* g, Value* u, double clamp = 0) {
    if (clamp > 0) return Build1(OpKind::kSwiglu, {g, u}, {{"clamp", clamp}});
    return Build1(OpKind::kSwiglu, {g, u});
  }
  Value* Softmax(Value* x) { return Build1(OpKind::kSoftmax, {x}); }
  Value* MatMul(Value* x, Value* w) { return Build1(OpKind::kMatMul, {x, w}); }
  llvm::SmallVector<Value*, 2> MatMulGroup(Value* x, llvm::ArrayRef<Value*> ws);
  std::pair<Value*, Value*> QGateSplit(Value* qg, int64_t n_head, int64_t head_dim);
  // freq_factors (an f32 weight [>= n_rot/2]) or null.
  Value* Rope(Value* x, Value* pos, int64_t n_rot, double base, Value* freq_factors = nullptr) {
    if (freq_factors != nullptr)
      return Build1(OpKind::kRope, {x, pos, freq_factors}, {{"n_rot", n_rot}, {"base", base}});
    return Build1(OpKind::kRope, {x, pos}, {{"n_rot", n_rot}, {"base", base}});
  }
  Value* MulWeight(Value* x, Value* w) { return Build1(OpKind::kMulWeight, {x, w}); }
  Value* Positions(Value* counter, Value* like) { return Build1(OpKind::kPositions, {counter, like}); }
  Op* AdvancePositions(Value* counter, Value* like);
  // ring > 0: the caches are rings for a sliding window of `ring` keys (ir/Ops.def).
  Op* KvAppend(Value* k, Value* v, Value* k_cache, Value* v_cache, Value* pos, int64_t ring = 0);
  // window > 0: a sliding window; ring: the caches are kv_append's rings (attributes written only
  // when set).
  Value* Attention(Value* q, Value* k_cache, Value* v_cache, Value* pos, double scale, int64_t window = 0,
                   int64_t ring = 0) {
    AttrDict a;
    a.Set("scale", scale);
    if (window > 0) a.Set("window", window);
    if (ring > 0) a.Set("ring", ring);
    return Build1(OpKind::kAttention, {q, k_cache, v_cache, pos}, std::move(a));
  }
  Value* Conv1dCausal(Value* x, Value* w, Value* state) { return Build1(OpKind::kConv1dCausal, {x, w, state}); }
  // Returns (beta, g).
  std::pair<Value*, Value*> DeltaNetGates(Value* b, Value* a, Value* dt_bias, Value* ssm_a);
  Value* GatedDeltaScan(Value* q, Value* k, Value* v, Value* g, Value* beta, Value* state, double scale) {
    return Build1(OpKind::kGatedDeltaScan, {q, k, v, g, beta, state}, {{"scale", scale}});
  }
  Value* GatedRmsNorm(Value* x, Value* z, Value* w, double eps) {
    return Build1(OpKind::kGatedRmsNorm, {x, z, w}, {{"eps", eps}});
  }
  // Returns (sum, normed).
  std::pair<Value*, Value*> AddRmsNorm(Value* a, Value* b, Value* w, double eps);
  // Returns (weights, ids).
  // expert_scale: an f32 weight [E] or null.
  std::pair<Value*, Value*> MoeRoute(Value* logits, int64_t k, Value* expert_scale = nullptr);
  // Sigmoid routing (moe_route_sigmoid): bias an f32 weight [E] or null; norm and scale written
  // only when set (scale 0 or 1: none).
  std::pair<Value*, Value*> MoeRouteSigmoid(Value* logits, int64_t k, Value* bias, bool norm, double scale);
  // w_gate_up: one fused [E, 2F, K] matrix or {w_gate, w_up}.
  // activation "silu" (not written: the default) or "gelu"; clamp > 0: the clamped SwiGLU.
  Value* MoeExperts(Value* x, Value* weights, Value* ids, Value* w_down, llvm::ArrayRef<Value*> w_gate_up,
                    const std::string& activation = "silu", double clamp = 0);
  Value* GatedAdd(Value* a, Value* b, Value* g) { return Build1(OpKind::kGatedAdd, {a, b, g}); }
  Value* TakeLastRow(Value* x) { return Build1(OpKind::kTakeLastRow, {x}); }
  // Returns (values, indices).
  std::pair<Value*, Value*> TopK(Value* x, int64_t k);
  Value* Argmax(Value* x) { return Build1(OpKind::kArgmax, {x}); }
  // One sampled id per row (ops.def `sample`): params f32[S, 8], penalties i32[S, 2P].
  Value* Sample(Value* logits, Value* params, Value* penalties) {
    return Build1(OpKind::kSample, {logits, params, penalties});
  }
  // Sequences (ir/Ops.def): the batch operands are the step function's arguments.
  llvm::SmallVector<Value*, 2> SeqPositions(Value* counter, Value* tok_seq, Value* seq_slot, Value* seq_start) {
    return Build(OpKind::kSeqPositions, {counter, tok_seq, seq_slot, seq_start});
  }
  Op* SeqAdvancePositions(Value* counter, Value* seq_slot, Value* seq_start);
  Op* PagedKvAppend(Value* k, Value* v, Value* k_cache, Value* v_cache, Value* blocks, Value* pos, Value* slot);
  Value* PagedAttention(Value* q, Value* k_cache, Value* v_cache, Value* blocks, Value* pos, Value* slot, double scale,
                        int64_t window = 0) {
    if (window > 0)
      return Build1(OpKind::kPagedAttention, {q, k_cache, v_cache, blocks, pos, slot},
                    {{"scale", scale}, {"window", window}});
    return Build1(OpKind::kPagedAttention, {q, k_cache, v_cache, blocks, pos, slot}, {{"scale", scale}});
  }
  Value* SeqConv1dCausal(Value* x, Value* w, Value* state, Value* seq_slot, Value* seq_start) {
    return Build1(OpKind::kSeqConv1dCausal, {x, w, state, seq_slot, seq_start});
  }
  Value* SeqGatedDeltaScan(Value* q, Value* k, Value* v, Value* g, Value* beta, Value* state, Value* seq_slot,
                           Value* seq_start, double scale) {
    return Build1(OpKind::kSeqGatedDeltaScan, {q, k, v, g, beta, state, seq_slot, seq_start}, {{"scale", scale}});
  }
  Value* TakeSeqLastRows(Value* x, Value* seq_start) { return Build1(OpKind::kTakeSeqLastRows, {x, seq_start}); }
  Value* Concat(llvm::ArrayRef<Value*> xs, int64_t axis) { return Build1(OpKind::kConcat, xs, {{"axis", axis}}); }
  llvm::SmallVector<Value*, 2> Split(Value* x, int64_t axis, std::vector<int64_t> sizes) {
    return Build(OpKind::kSplit, {x}, {{"axis", axis}, {"sizes", std::move(sizes)}});
  }
  Value* Reshape(Value* x, Shape shape);
  Value* View(Value* x, int64_t axis, int64_t offset, int64_t size) {
    return Build1(OpKind::kView, {x}, {{"axis", axis}, {"offset", offset}, {"size", size}});
  }
  Value* Cast(Value* x, DType to) { return Build1(OpKind::kCast, {x}, {{"dtype", DTypeName(to)}}); }
  Value* Constant(TensorType type, double value) { return Build1(OpKind::kConstant, {}, {{"value", value}}, {type}); }
  Op* Return(llvm::ArrayRef<Value*> values);
  // A segment op; build its body with a builder at SetInsertionPointToEnd(seg->body()).
  Op* Segment(bool capturable, std::optional<int64_t> bucket = std::nullopt);

 private:
  Value* Poison();
  bool IsPoison(Value* v) const;

  Block* block_ = nullptr;
  Block::iterator pos_;
  absl::Status status_;
  Op* last_op_ = nullptr;
  std::vector<std::unique_ptr<Value>> poison_;
};

}  // namespace memra::ir
