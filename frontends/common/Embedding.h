// The token embedding: embed(tokens, token_embd.weight) -> f32[T, n_embd], named as llama.cpp's
// node ("model.input_embed"). Families that scale the embedding (Gemma: × sqrt(n_embd)) add
// their op after it.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ir/Builder.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

inline constexpr char kTokenEmbeddingTensor[] = "token_embd.weight";

// Declares token_embd.weight {n_embd, n_vocab}.
absl::Status DeclareTokenEmbedding(const gguf::GgufFile& file, ir::Module& m, int64_t n_embd, int64_t n_vocab);
ir::Value* BuildTokenEmbedding(ir::OpBuilder& b, const ir::Module& m, ir::Value* tokens);

}  // namespace memra::frontends
