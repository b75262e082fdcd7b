#include "frontends/common/DecoderFunctions.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "frontends/common/Embedding.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/common/StepLayout.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"

namespace memra::frontends {
namespace {

using ir::Dim;
using ir::DType;
using ir::OpBuilder;
using ir::Shape;
using ir::TensorType;
using ir::Value;

absl::Status Failed(const OpBuilder& b, absl::string_view what) {
  return absl::Status(b.status().code(), absl::StrCat("lowering ", what, ": ", b.status().message()));
}

Value* Embed(OpBuilder& b, const ir::Module& m, const DecoderHooks& h, Value* tokens) {
  return h.embed ? h.embed(b, tokens) : BuildTokenEmbedding(b, m, tokens);
}

Value* Head(OpBuilder& b, const ir::Module& m, const DecoderHooks& h, Value* x, const OutputHeadParams& p) {
  Value* logits = BuildOutputHead(b, m, x, p);
  return h.after_head ? h.after_head(b, logits) : logits;
}

}  // namespace

absl::Status BuildDecoderFunction(ir::Module& m, const DecoderHooks& h, absl::string_view name, Dim T,
                                  bool all_logits) {
  ir::Function* fn = m.AddFunction(name);
  Value* tokens = fn->AddArgument("tokens", TensorType(DType::kI32, Shape{T}));
  OpBuilder b(fn);
  Value* x = Embed(b, m, h, tokens);
  Value* pos = b.Positions(h.pos, tokens)->Named("pos");
  if (h.before_layers) h.before_layers(b, T, tokens, x);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    x = h.layer(LayerContext{b, m, il, T}, x, pos);
    if (!b.ok()) return Failed(b, absl::StrCat("@", name, " layer ", il));
  }
  OutputHeadParams head = h.head;
  head.all_logits = all_logits;
  Value* logits = Head(b, m, h, x, head);
  b.AdvancePositions(h.pos, tokens);
  b.Return({logits});
  if (!b.ok()) return Failed(b, absl::StrCat("@", name));
  fn->set_result_types({logits->type()});
  return absl::OkStatus();
}

absl::Status BuildDecoderStep(ir::Module& m, const DecoderHooks& h, const LowerOptions& opt, ir::StateVar* blocks) {
  const Dim T = Dim::Symbol("T");
  ir::Function* fn = m.AddFunction("step");
  const auto [tokens, tok_seq, seq_slot, seq_start, sampling, penalties] = AddStepArguments(fn, opt);
  OpBuilder b(fn);
  Value* x = Embed(b, m, h, tokens);
  auto ps = b.SeqPositions(h.pos, tok_seq, seq_slot, seq_start);
  if (!b.ok() || ps.size() != 2) return Failed(b, "@step");
  Value* pos = ps[0]->Named("pos");
  SeqBatch seq{seq_slot, seq_start, ps[1]->Named("slot"), blocks};
  if (h.before_layers) h.before_layers(b, T, tokens, x);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    x = h.layer(LayerContext{b, m, il, T, &seq}, x, pos);
    if (!b.ok()) return Failed(b, absl::StrCat("@step layer ", il));
  }
  OutputHeadParams head = h.head;
  head.all_logits = false;
  head.seq_start = seq_start;
  Value* logits = Head(b, m, h, x, head);
  Value* ids = b.Sample(logits, sampling, penalties)->Named("picks");
  b.SeqAdvancePositions(h.pos, seq_slot, seq_start);
  b.Return({logits, ids});
  if (!b.ok()) return Failed(b, "@step");
  fn->set_result_types({logits->type(), ids->type()});
  return absl::OkStatus();
}

absl::Status BuildDecoderFunctions(ir::Module& m, const DecoderHooks& hooks, const LowerOptions& opt,
                                   ir::StateVar* blocks, const gguf::GgufFile& file) {
  if (opt.slots > 0) {
    MEMRA_RETURN_IF_ERROR(BuildDecoderStep(m, hooks, opt, blocks));
  } else {
    MEMRA_RETURN_IF_ERROR(BuildDecoderFunction(m, hooks, "prefill", Dim::Symbol("T"), opt.prefill_all_logits));
    MEMRA_RETURN_IF_ERROR(BuildDecoderFunction(m, hooks, "decode", Dim(1), /*all_logits=*/true));
  }
  MEMRA_RETURN_IF_ERROR(CheckValueWeightsAreF32(file, m));
  return ir::VerifyModule(m);
}

}  // namespace memra::frontends
