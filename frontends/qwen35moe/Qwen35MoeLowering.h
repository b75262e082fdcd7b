// Lowering of a `qwen35moe` GGUF (Qwen3.5 MoE: the qwen35 trunk with a routed + shared expert FFN
// in every layer) to the IR. The module is the qwen35 one (frontends/qwen35/Qwen35Lowering.h),
// with each layer's FFN the MoE block of frontends/common/MoeFfn.h (softmax routing, top-k
// renormalized, SwiGLU experts, shared expert gated by sigmoid(ffn_gate_inp_shexp · y)) and the
// attributes n_expert, n_expert_used, n_ff_exp, n_ff_shexp.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "frontends/LowerOptions.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

// Errors (before anything runs): the hyperparameters' (ReadQwen35MoeHparams), expert tensors whose
// shapes disagree with the metadata (naming the tensor and the keys), a missing router, expert or
// shared-expert tensor (its gate included), dense FFN tensors in a MoE file, and the trunk's.
absl::StatusOr<std::unique_ptr<ir::Module>> LowerQwen35Moe(const gguf::GgufFile& file,
                                                           const LowerOptions& options = {});

}  // namespace memra::frontends
