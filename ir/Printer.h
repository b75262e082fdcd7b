// The textual form (.mir). Printing then parsing then printing gives identical text.
//
//   module attributes {arch = "qwen35"}
//   weight @blk.0.attn_norm.weight : f32[256]
//   state kv @blk.3.k_cache : f32[4096, 2, 64] {layer = 3}
//   func @prefill(%tok: i32[T]) -> (f32[T, 259]) {
//     %x = embed(%tok, @token_embd.weight) : f32[T, 256]
//     %q, %gate = q_gate_split(%qg) {head_dim = 64, n_head = 4} : f32[T, 4, 64], f32[T, 4, 64]
//     kv_append(%k, %v, @blk.3.k_cache, @blk.3.v_cache, %pos)
//     segment {capturable = 1} {
//       ...
//     }
//     return %logits
//   }
//
// Unnamed values print as %0, %1, ...; a name used twice in a function gets a _N suffix.
#pragma once

#include <string>

#include "ir/Module.h"
#include "llvm/Support/raw_ostream.h"

namespace memra::ir {

void PrintModule(const Module& m, llvm::raw_ostream& os);
void PrintFunction(const Function& f, llvm::raw_ostream& os);
std::string ToText(const Module& m);
std::string ToText(const Function& f);

// True if `name` prints bare after % or @ (otherwise globals are quoted, values renamed).
bool IsBareName(absl::string_view name);

}  // namespace memra::ir
