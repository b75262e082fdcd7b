// Lowering of a `gemma4` GGUF (Gemma 4 dense) to the IR: @prefill and @decode over sliding-window
// and full attention layers (per-layer head counts and dims, the full layers' proportional rope
// through rope_freqs, K/V shared by the last layers, the weightless V norm), the GELU FFN with its
// post norms, the per-layer output scale and the final logit soft cap, as llama.cpp's gemma4 graph
// builds them (node names follow it, so per-node dumps line up). docs/design/gemma4-plan.md.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "frontends/LowerOptions.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

// Errors: missing / inconsistent keys or tensors (named); Unimplemented for what memra does not run
// yet: MoE layers (ffn_gate_inp), per-layer inputs (E-variants), a step over several sequences
// (slots > 0). The module verifies.
absl::StatusOr<std::unique_ptr<ir::Module>> LowerGemma4(const gguf::GgufFile& file, const LowerOptions& options = {});

}  // namespace memra::frontends
