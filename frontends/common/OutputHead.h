// The output head: final RMS norm (output_norm.weight), then, unless every row's logits are
// wanted, the last row only, then the LM head (output.weight, or token_embd.weight when the head
// is tied): x [T, n_embd] -> logits f32[T or 1, n_vocab]. Values are named as llama.cpp's nodes
// (result_norm, result_output).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ir/Builder.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct OutputHeadParams {
  double eps = 0;           // of the final norm
  bool tied = false;        // output.weight absent: the head is token_embd.weight
  bool all_logits = false;  // logits of every row, not only the last
  // A step over several sequences: the logits of each entry's last row ([S, V]).
  ir::Value* seq_start = nullptr;
};

// Declares output_norm.weight {n_embd} and, unless tied, output.weight {n_embd, n_vocab}.
absl::Status DeclareOutputHead(const gguf::GgufFile& file, ir::Module& m, int64_t n_embd, int64_t n_vocab, bool tied);
ir::Value* BuildOutputHead(ir::OpBuilder& b, const ir::Module& m, ir::Value* x, const OutputHeadParams& p);

}  // namespace memra::frontends
