// The token embedding: embed(tokens, token_embd.weight) -> f32[T, n_embd], named as llama.cpp's
// node ("model.input_embed"). Families that scale the embedding (Gemma: × sqrt(n_embd)) add
// their op after it.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Builder.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

inline constexpr char kTokenEmbeddingTensor[] = "token_embd.weight";

// The vocabulary size (the rows of token_embd.weight, which must be {n_embd, n_vocab};
// `embd_key` names the key that gave n_embd in the error) and whether the head is tied (no
// output.weight), from the tensor table.
struct VocabAndHead {
  int64_t n_vocab = 0;
  bool tied_output = false;
};
absl::StatusOr<VocabAndHead> ReadVocabAndHead(const gguf::GgufFile& file, int64_t n_embd, absl::string_view embd_key);

// Declares token_embd.weight {n_embd, n_vocab}.
absl::Status DeclareTokenEmbedding(const gguf::GgufFile& file, ir::Module& m, int64_t n_embd, int64_t n_vocab);
ir::Value* BuildTokenEmbedding(ir::OpBuilder& b, const ir::Module& m, ir::Value* tokens);

}  // namespace memra::frontends
