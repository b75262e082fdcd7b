#include "frontends/common/StepLayout.h"

#include "absl/strings/str_cat.h"

namespace memra::frontends {

absl::StatusOr<PagedKvLayout> CheckSlotOptions(const LowerOptions& opt, int64_t n_ctx) {
  if (opt.slots < 0 || opt.slots > LowerOptions::kMaxSlots)
    return absl::InvalidArgumentError(
        absl::StrCat("slots must be in [0, ", LowerOptions::kMaxSlots, "] (got ", opt.slots, ")"));
  PagedKvLayout l;
  if (opt.slots == 0) return l;
  if (opt.kv_blocks < 0)
    return absl::InvalidArgumentError(absl::StrCat("kv_blocks must be >= 0 (got ", opt.kv_blocks, ")"));
  if (opt.sampler_penalties < 1 || opt.sampler_penalties > 4096)
    return absl::InvalidArgumentError(
        absl::StrCat("sampler_penalties must be in [1, 4096] (got ", opt.sampler_penalties, ")"));
  l.max_blocks = (n_ctx + LowerOptions::kKvBlock - 1) / LowerOptions::kKvBlock;
  l.kv_blocks = opt.kv_blocks > 0 ? opt.kv_blocks : opt.slots * l.max_blocks;
  return l;
}

void RecordSlotAttributes(ir::AttrDict& a, const LowerOptions& opt, const PagedKvLayout& layout) {
  if (opt.slots <= 0) return;
  a.Set("slots", opt.slots);
  a.Set("kv_block", LowerOptions::kKvBlock);
  a.Set("kv_blocks", layout.kv_blocks);
  a.Set("sampler_penalties", opt.sampler_penalties);
}

StepArguments AddStepArguments(ir::Function* fn, const LowerOptions& opt) {
  using ir::DType;
  using ir::Shape;
  using ir::TensorType;
  const int64_t S = opt.slots;
  const ir::Dim T = ir::Dim::Symbol("T");
  StepArguments a;
  a.tokens = fn->AddArgument("tokens", TensorType(DType::kI32, Shape{T}));
  a.tok_seq = fn->AddArgument("tok_seq", TensorType(DType::kI32, Shape{T}));
  a.seq_slot = fn->AddArgument("seq_slot", TensorType(DType::kI32, Shape{S}));
  a.seq_start = fn->AddArgument("seq_start", TensorType(DType::kI32, Shape{S + 1}));
  a.sampling = fn->AddArgument("sampling", TensorType(DType::kF32, Shape{S, 8}));
  a.penalties = fn->AddArgument("penalties", TensorType(DType::kI32, Shape{S, 2 * opt.sampler_penalties}));
  return a;
}

}  // namespace memra::frontends
