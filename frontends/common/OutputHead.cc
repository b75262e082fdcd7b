#include "frontends/common/OutputHead.h"

#include "frontends/common/Embedding.h"
#include "frontends/common/ModelWeights.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

absl::Status DeclareOutputHead(const gguf::GgufFile& file, ir::Module& m, int64_t n_embd, int64_t n_vocab, bool tied) {
  MEMRA_RETURN_IF_ERROR(DeclareWeight(file, m, "output_norm.weight", {n_embd}));
  if (tied) return absl::OkStatus();
  return DeclareWeight(file, m, "output.weight", {n_embd, n_vocab});
}

ir::Value* BuildOutputHead(ir::OpBuilder& b, const ir::Module& m, ir::Value* x, const OutputHeadParams& p) {
  ir::Value* out = b.RmsNorm(x, m.weight("output_norm.weight"), p.eps)->Named("result_norm");
  if (p.seq_start)
    out = b.TakeSeqLastRows(out, p.seq_start)->Named("result_norm_last");
  else if (!p.all_logits)
    out = b.TakeLastRow(out)->Named("result_norm_last");
  ir::Value* head = m.weight(p.tied ? kTokenEmbeddingTensor : "output.weight");
  return b.MatMul(out, head)->Named("result_output");
}

}  // namespace memra::frontends
