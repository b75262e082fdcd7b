// Options of lowering a GGUF to the IR. The same for every model family (frontends/ModelFamily.h),
// so the commands and runtime::Session set them without knowing the architecture.
#pragma once

#include <algorithm>
#include <cstdint>

namespace memra::frontends {

struct LowerOptions {
  // Context length (KV cache rows). 0: min(the model's training context, kDefaultContext).
  int64_t n_ctx = 0;
  // @prefill returns logits for every token (needed for --logits-out) instead of the last row.
  bool prefill_all_logits = false;
  // Sequences per step (docs/design/sequences.md). 0: today's one-sequence module (@prefill,
  // @decode, a scalar position, contiguous KV). S > 0: one @step over at most S sequences, per-slot
  // recurrent state, a paged KV cache of kv_blocks blocks of kKvBlock rows; n_ctx is per slot.
  int64_t slots = 0;
  // Blocks in the paged KV pool; 0: enough for every slot to hold n_ctx tokens.
  int64_t kv_blocks = 0;
  // Penalty entries per row of @step's device sampler (the distinct ids of a request's penalty
  // window); a request with more is sampled on the host from its logits.
  int64_t sampler_penalties = 64;
  static constexpr int64_t kDefaultContext = 4096;
  static constexpr int64_t kKvBlock = 64;
  static constexpr int64_t kMaxSlots = 256;
};

// The context length a module is built for: options.n_ctx, or the default above.
inline int64_t ContextLength(const LowerOptions& options, int64_t n_ctx_train) {
  return options.n_ctx > 0 ? options.n_ctx : std::min(n_ctx_train, LowerOptions::kDefaultContext);
}

}  // namespace memra::frontends
