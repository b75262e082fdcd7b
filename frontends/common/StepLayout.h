// The batched @step a family lowers with LowerOptions::slots > 0 (ir/Ops.def, "sequences"): the
// checked slot options, the paged KV layout they give, the module attributes that record it and
// the step's arguments. Shared by every family's lowering.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "frontends/LowerOptions.h"
#include "ir/Attribute.h"
#include "ir/Function.h"

namespace memra::frontends {

struct PagedKvLayout {
  int64_t max_blocks = 0;  // MB: blocks per slot (n_ctx positions)
  int64_t kv_blocks = 0;   // NB: blocks in the pool
};

// slots in [0, kMaxSlots]; with slots, kv_blocks >= 0 and sampler_penalties in [1, 4096]: errors
// name the option. The layout for n_ctx positions per slot (zeros without slots).
absl::StatusOr<PagedKvLayout> CheckSlotOptions(const LowerOptions& opt, int64_t n_ctx);

// slots, kv_block, kv_blocks, sampler_penalties (with slots).
void RecordSlotAttributes(ir::AttrDict& a, const LowerOptions& opt, const PagedKvLayout& layout);

// @step(tokens: i32[T], tok_seq: i32[T], seq_slot: i32[S], seq_start: i32[S+1], sampling: f32[S, 8],
//       penalties: i32[S, 2P]).
struct StepArguments {
  ir::Value* tokens = nullptr;
  ir::Value* tok_seq = nullptr;
  ir::Value* seq_slot = nullptr;
  ir::Value* seq_start = nullptr;
  ir::Value* sampling = nullptr;
  ir::Value* penalties = nullptr;
};
StepArguments AddStepArguments(ir::Function* fn, const LowerOptions& opt);

}  // namespace memra::frontends
