// The functions every decoder family lowers to, around its own layers: @prefill(tokens) and
// @decode(tokens) (one sequence: embed, positions, the layers, the output head, advance the
// position), or @step(tokens, tok_seq, seq_slot, seq_start, sampling, penalties) over several
// sequences (ir/Ops.def, "sequences": the logits of each entry's last row and the device sampler's
// picks). A family gives its embedding, its layer and its head as hooks.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "frontends/LowerOptions.h"
#include "frontends/common/LayerContext.h"
#include "frontends/common/OutputHead.h"
#include "ir/Builder.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct DecoderHooks {
  int64_t n_layer = 0;
  OutputHeadParams head;        // eps and tied; all_logits and seq_start set per function
  ir::StateVar* pos = nullptr;  // the position state
  // The call's input rows from its tokens (default: BuildTokenEmbedding).
  std::function<ir::Value*(ir::OpBuilder&, ir::Value* tokens)> embed;
  // Called once per function after the embedding, before the layers (e.g. Gemma 4's per-layer inputs).
  std::function<void(ir::OpBuilder&, const ir::Dim& T, ir::Value* tokens, ir::Value* x)> before_layers;
  // One layer: the residual stream after it.
  std::function<ir::Value*(const LayerContext&, ir::Value* x, ir::Value* pos)> layer;
  // The logits from the output head's (default: BuildOutputHead as is; e.g. Gemma 4 soft-caps them).
  std::function<ir::Value*(ir::OpBuilder&, ir::Value* logits)> after_head;
};

// @name over T tokens of one sequence (all_logits: every row's logits, else the last row's).
absl::Status BuildDecoderFunction(ir::Module& m, const DecoderHooks& hooks, absl::string_view name, ir::Dim T,
                                  bool all_logits);
// @step over up to opt.slots sequences; `blocks` is the paged KV block table (or null).
absl::Status BuildDecoderStep(ir::Module& m, const DecoderHooks& hooks, const LowerOptions& opt, ir::StateVar* blocks);
// What every family's lowering ends with: @step when opt.slots > 0, else @prefill and @decode;
// then the value weights checked f32 against `file` and the module verified.
absl::Status BuildDecoderFunctions(ir::Module& m, const DecoderHooks& hooks, const LowerOptions& opt,
                                   ir::StateVar* blocks, const gguf::GgufFile& file);

}  // namespace memra::frontends
