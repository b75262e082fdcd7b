#include "frontends/qwen35moe/Qwen35MoeHparams.h"

#include "absl/strings/str_cat.h"
#include "frontends/common/KeyReader.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"

namespace memra::frontends {
namespace {

constexpr int64_t kLlamaMaxExperts = 1024;  // llama.cpp's LLAMA_MAX_EXPERTS (llama-hparams.h)

}  // namespace

absl::StatusOr<Qwen35MoeHparams> ReadQwen35MoeHparams(const gguf::GgufFile& f) {
  Qwen35MoeHparams h;
  MEMRA_ASSIGN_OR_RETURN(h.trunk, ReadQwen35TrunkHparams(f, "qwen35moe"));
  KeyReader r(f, h.trunk.arch);
  MoeFfnParams& p = h.moe;
  p.key_expert_count = r.Key("expert_count");
  p.key_ff_exp = r.Key("expert_feed_forward_length");
  p.key_ff_shexp = r.Key("expert_shared_feed_forward_length");
  MEMRA_ASSIGN_OR_RETURN(p.n_expert, r.Required("expert_count"));
  MEMRA_ASSIGN_OR_RETURN(p.n_expert_used, r.Required("expert_used_count"));
  if (p.n_expert <= 0) return Inconsistent(f, absl::StrCat(p.key_expert_count, " = 0: a MoE model needs experts"));
  if (p.n_expert > kLlamaMaxExperts)
    return Inconsistent(f, absl::StrCat(p.key_expert_count, " = ", p.n_expert, " exceeds ", kLlamaMaxExperts,
                                        " (llama.cpp's LLAMA_MAX_EXPERTS)"));
  if (p.n_expert_used <= 0)
    return Inconsistent(f, absl::StrCat(r.Key("expert_used_count"), " = 0: top-k needs at least one expert"));
  if (p.n_expert_used > p.n_expert)
    return Inconsistent(f, absl::StrCat(r.Key("expert_used_count"), " (top-k = ", p.n_expert_used, ") exceeds ",
                                        p.key_expert_count, " (", p.n_expert, ")"));
  MEMRA_ASSIGN_OR_RETURN(int64_t groups, r.Optional("expert_group_count", 0));
  if (groups > 1)
    return absl::UnimplementedError(absl::StrCat(f.path(), ": key \"", r.Key("expert_group_count"), "\" = ", groups,
                                                 ": grouped expert routing is not supported yet"));
  MEMRA_ASSIGN_OR_RETURN(p.n_ff_exp, r.Optional("expert_feed_forward_length", h.trunk.n_ff / p.n_expert_used));
  MEMRA_ASSIGN_OR_RETURN(p.n_ff_shexp, r.Optional("expert_shared_feed_forward_length", h.trunk.n_ff));
  if (p.n_ff_exp <= 0) return Inconsistent(f, absl::StrCat(p.key_ff_exp, " = 0"));
  if (p.n_ff_shexp <= 0) return Inconsistent(f, absl::StrCat(p.key_ff_shexp, " = 0"));
  return h;
}

void AddMoeAttributes(const MoeFfnParams& p, ir::AttrDict& a) {
  a.Set("n_expert", p.n_expert);
  a.Set("n_expert_used", p.n_expert_used);
  a.Set("n_ff_exp", p.n_ff_exp);
  a.Set("n_ff_shexp", p.n_ff_shexp);
}

ir::AttrDict Qwen35MoeAttributes(const Qwen35MoeHparams& h) {
  ir::AttrDict a = Qwen35Attributes(h.trunk);
  AddMoeAttributes(h.moe, a);
  return a;
}

absl::StatusOr<ir::AttrDict> ReadQwen35MoeAttributes(const gguf::GgufFile& file) {
  MEMRA_ASSIGN_OR_RETURN(Qwen35MoeHparams h, ReadQwen35MoeHparams(file));
  return Qwen35MoeAttributes(h);
}

}  // namespace memra::frontends
