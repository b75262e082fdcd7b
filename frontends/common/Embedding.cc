#include "frontends/common/Embedding.h"

#include "frontends/common/ModelWeights.h"

namespace memra::frontends {

absl::Status DeclareTokenEmbedding(const gguf::GgufFile& file, ir::Module& m, int64_t n_embd, int64_t n_vocab) {
  return DeclareWeight(file, m, kTokenEmbeddingTensor, {n_embd, n_vocab});
}

ir::Value* BuildTokenEmbedding(ir::OpBuilder& b, const ir::Module& m, ir::Value* tokens) {
  return b.Embed(tokens, m.weight(kTokenEmbeddingTensor))->Named("model.input_embed");
}

}  // namespace memra::frontends
