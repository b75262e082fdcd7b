// Hyperparameters of a `qwen35moe` (Qwen3.5 MoE hybrid) GGUF: the Qwen3.5 trunk's (keys
// `qwen35moe.*`, read as for qwen35) plus the experts', as llama.cpp's qwen35moe loader reads them.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "frontends/common/MoeFfn.h"
#include "frontends/qwen35/Qwen35Hparams.h"
#include "ir/Attribute.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct Qwen35MoeHparams {
  Qwen35Hparams trunk;  // trunk.arch = "qwen35moe"
  // expert_count, expert_used_count (both required and > 0, used <= count),
  // expert_feed_forward_length (default feed_forward_length / expert_used_count),
  // expert_shared_feed_forward_length (default feed_forward_length).
  MoeFfnParams moe;
};

// Errors name the key: expert_count / expert_used_count missing (NotFound), 0, top-k above the
// expert count or the count above llama.cpp's LLAMA_MAX_EXPERTS (1024) (InvalidArgument); expert
// groups (expert_group_count > 1, DeepSeek-style group routing) are Unimplemented.
absl::StatusOr<Qwen35MoeHparams> ReadQwen35MoeHparams(const gguf::GgufFile& file);

// The trunk's attributes (Qwen35Attributes) + n_expert, n_expert_used, n_ff_exp, n_ff_shexp.
ir::AttrDict Qwen35MoeAttributes(const Qwen35MoeHparams& h);
void AddMoeAttributes(const MoeFfnParams& p, ir::AttrDict& a);
// The qwen35moe family's hyperparameter reader.
absl::StatusOr<ir::AttrDict> ReadQwen35MoeAttributes(const gguf::GgufFile& file);

}  // namespace memra::frontends
