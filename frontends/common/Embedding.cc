#include "frontends/common/Embedding.h"

#include "absl/strings/str_cat.h"
#include "frontends/common/ModelWeights.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {

absl::StatusOr<VocabAndHead> ReadVocabAndHead(const gguf::GgufFile& f, int64_t n_embd, absl::string_view embd_key) {
  MEMRA_ASSIGN_OR_RETURN(const gguf::TensorInfo* embd, f.GetTensor(kTokenEmbeddingTensor));
  if (embd->ne.size() != 2 || embd->ne[0] != n_embd)
    return absl::InvalidArgumentError(absl::StrCat(f.path(), ": tensor \"", kTokenEmbeddingTensor, "\" has shape ",
                                                   gguf::ShapeString(embd->ne), ", expected {", n_embd, ", n_vocab} (",
                                                   embd_key, " = ", n_embd, ")"));
  VocabAndHead v;
  v.n_vocab = embd->ne[1];
  if (v.n_vocab <= 0)
    return absl::InvalidArgumentError(absl::StrCat(f.path(), ": tensor \"", kTokenEmbeddingTensor, "\" has no rows"));
  v.tied_output = f.FindTensor("output.weight") == nullptr;
  return v;
}

absl::Status DeclareTokenEmbedding(const gguf::GgufFile& file, ir::Module& m, int64_t n_embd, int64_t n_vocab) {
  return DeclareWeight(file, m, kTokenEmbeddingTensor, {n_embd, n_vocab});
}

ir::Value* BuildTokenEmbedding(ir::OpBuilder& b, const ir::Module& m, ir::Value* tokens) {
  return b.Embed(tokens, m.weight(kTokenEmbeddingTensor))->Named("model.input_embed");
}

}  // namespace memra::frontends
