#include "frontends/qwen35moe/Qwen35MoeLowering.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/common/MoeFfn.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/qwen35/Qwen35Trunk.h"
#include "frontends/qwen35moe/Qwen35MoeHparams.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {
namespace {

// qwen35moe's FFN: routed experts + the gated shared expert in every layer.
class MoeFfn : public Qwen35Ffn {
 public:
  explicit MoeFfn(const MoeFfnParams& p) : p_(p) {}
  absl::Status CheckTensor(const gguf::GgufFile& f, const gguf::TensorInfo& t) const override {
    for (absl::string_view dense : {".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"})
      if (absl::EndsWith(t.name, dense))
        return absl::InvalidArgumentError(
            absl::StrCat(f.path(), ": tensor \"", t.name, "\" is a dense FFN tensor in a qwen35moe model"));
    return absl::OkStatus();
  }
  absl::Status Declare(const gguf::GgufFile& f, ir::Module& m, int64_t layer, int64_t n_embd) const override {
    return DeclareMoeFfn(f, m, layer, n_embd, p_);
  }
  ir::Value* Build(const LayerContext& c, ir::Value* y) const override { return BuildMoeFfn(c, y, p_); }
  void RecordAttributes(ir::AttrDict& a) const override { AddMoeAttributes(p_, a); }

 private:
  MoeFfnParams p_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Module>> LowerQwen35Moe(const gguf::GgufFile& file, const LowerOptions& options) {
  MEMRA_ASSIGN_OR_RETURN(Qwen35MoeHparams h, ReadQwen35MoeHparams(file));
  return LowerQwen35Trunk(file, h.trunk, options, MoeFfn(h.moe));
}

}  // namespace memra::frontends
