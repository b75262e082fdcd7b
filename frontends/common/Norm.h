// RMS norm of a layer's activations with one of its norm tensors (attn_norm, post_attention_norm,
// ffn_norm, ...): y = rms_norm(x, blk.N.<tensor>, eps), named "<node>-N". Norm weights are used
// as stored (families whose norm is x̂·(1+w) store 1+w in the GGUF).
#pragma once

#include "absl/strings/string_view.h"
#include "frontends/common/LayerContext.h"

namespace memra::frontends {

inline ir::Value* BuildLayerRmsNorm(const LayerContext& c, ir::Value* x, absl::string_view tensor, double eps,
                                    absl::string_view node) {
  return c.b.RmsNorm(x, c.W(tensor), eps)->Named(c.Node(node));
}

}  // namespace memra::frontends
