// The Qwen3.5 hybrid trunk shared by the qwen35 (dense) and qwen35moe families: token embedding,
// per layer attn_norm → Gated DeltaNet or gated attention → residual → post_attention_norm → FFN →
// residual, the output head, the state, @prefill and @decode (frontends/qwen35/Qwen35Lowering.h
// describes the module). Only the FFN differs between the families: a Qwen35Ffn says which
// tensors it needs and builds it.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontends/LowerOptions.h"
#include "frontends/common/LayerContext.h"
#include "frontends/qwen35/Qwen35Hparams.h"
#include "ir/Attribute.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
struct TensorInfo;
}  // namespace memra::gguf

namespace memra::frontends {

class Qwen35Ffn {
 public:
  virtual ~Qwen35Ffn() = default;
  // Refuses a tensor of the file this FFN cannot use (the other family's FFN tensors).
  virtual absl::Status CheckTensor(const gguf::GgufFile& file, const gguf::TensorInfo& t) const = 0;
  // Declares layer `layer`'s FFN tensors as module weights (shape-checked, errors naming them).
  virtual absl::Status Declare(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd) const = 0;
  // y (the post-attention-normed residual) [T, n_embd] -> the FFN output "ffn_out-N" [T, n_embd].
  virtual ir::Value* Build(const LayerContext& c, ir::Value* y) const = 0;
  // The family's own hyperparameters as module attributes (beyond Qwen35Attributes).
  virtual void RecordAttributes(ir::AttrDict& a) const = 0;
};

// Lowers the trunk of `h` (read with ReadQwen35TrunkHparams) with `ffn` as every layer's FFN.
absl::StatusOr<std::unique_ptr<ir::Module>> LowerQwen35Trunk(const gguf::GgufFile& file, const Qwen35Hparams& h,
                                                             const LowerOptions& options, const Qwen35Ffn& ffn);

}  // namespace memra::frontends
