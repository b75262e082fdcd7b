// Lowering of a `qwen35` GGUF (Qwen3.5 dense: Gated DeltaNet + gated full attention) to the IR.
//
// The module holds:
//   * weights: every tensor the graph uses, by GGUF name (never their data);
//   * state: @pos (position counter, i32[]); per attention layer N @blk.N.k_cache and
//     @blk.N.v_cache (kv, [n_ctx, n_head_kv, head_dim]); per linear layer N @blk.N.conv_state
//     (conv, [conv_dim, d_conv-1]) and @blk.N.delta_state (delta, [Hv, d_state, d_state]);
//   * @prefill(%tokens: i32[T]) -> f32[T, n_vocab] (all rows) or f32[1, n_vocab] (last row),
//     starting at the position the state holds; @decode(%tokens: i32[1]) -> f32[1, n_vocab];
//     both advance @pos by their token count;
//   * module attributes: arch and every hyperparameter (n_embd, n_layer, ..., n_ctx, n_vocab,
//     recurrent_layers, prefill_logits = "all" | "last").
// Activations carry llama.cpp's node names (attn_norm-N, attn_residual-N, l_out-N, result_norm,
// result_output, ...) so executor traces line up with the fixture's per-node dumps.
//
// Semantics follow llama.cpp's reading of the GGUF (docs/ARCHITECTURE.md, numerics contract).
// The layers are composed from the shared builders of frontends/common/. Callers lower through
// the registry (frontends/ModelFamily.h: LowerModel), which dispatches here for "qwen35".
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "frontends/LowerOptions.h"
#include "frontends/qwen35/Qwen35Hparams.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

// Errors: an architecture other than qwen35, missing / inconsistent keys (named), missing tensors
// or tensors of the wrong shape or of a type the IR has no dtype for (named, with expected and
// actual shape). The module verifies.
absl::StatusOr<std::unique_ptr<ir::Module>> LowerQwen35(const gguf::GgufFile& file, const LowerOptions& options = {});

}  // namespace memra::frontends
