// Lowering of a `step35` GGUF (Step 3.5) to the IR: @prefill and @decode (or @step over several
// sequences) over sliding-window and full attention layers of different head counts (per-layer
// rotary dims and bases, the full layers' optional rope_freqs), per-head q/k norms, the head-wise
// output gate sigmoid(attn_gate · h) on each head, leading dense SwiGLU layers, then MoE layers:
// the sigmoid router with its selection bias (moe_route_sigmoid), the routed experts and the
// shared expert with their SwiGLU clamps. As llama.cpp's step35 graph builds them (node names
// follow it, so per-node dumps line up). The MTP blocks (nextn) stay in the file, not run.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "frontends/LowerOptions.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

// Errors: missing / inconsistent keys or tensors (named, ReadStep35Hparams); Unimplemented for
// softmax routing with a selection bias or without renormalization (memra's moe_route always
// renormalizes). The module verifies.
absl::StatusOr<std::unique_ptr<ir::Module>> LowerStep35(const gguf::GgufFile& file, const LowerOptions& options = {});

}  // namespace memra::frontends
