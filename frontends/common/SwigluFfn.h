// The dense SwiGLU FFN of a layer: down · (silu(gate · y) ⊙ (up · y)) with blk.N.ffn_gate,
// ffn_up {n_embd, n_ff} and ffn_down {n_ff, n_embd}; y [T, n_embd] -> [T, n_embd]. Nodes
// ffn_gate-N, ffn_up-N, ffn_swiglu-N, ffn_out-N. (fuse-swiglu later makes the gate/up pair one
// matmul_swiglu.)
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "frontends/common/LayerContext.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

absl::Status DeclareSwigluFfn(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd, int64_t n_ff);
// clamp > 0: the clamped SwiGLU (ir/Ops.def swiglu; Step 3.5's swiglu_clamp_shexp on a dense layer).
ir::Value* BuildSwigluFfn(const LayerContext& c, ir::Value* y, double clamp = 0);

}  // namespace memra::frontends
