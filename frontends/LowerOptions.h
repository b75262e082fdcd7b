// Options of lowering a GGUF to the IR. The same for every model family (frontends/ModelFamily.h),
// so the commands and runtime::Session set them without knowing the architecture.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/DType.h"

namespace memra::frontends {

// Element types of the KV cache (llama.cpp's -ctk / -ctv): f32, or f16 / bf16 rows, which halve
// its memory and the bytes a decode step streams at depth, or q8_0 blocks (ggml's: 32 int8 and an
// f16 scale, 8.5 bits an element; the head size a multiple of 32). Keys and values are rounded
// (quantized) once, when kv_append writes them; attention reads them widened to f32 (or as bf16 on
// the tensor cores).
struct KvCacheTypes {
  ir::DType k = ir::DType::kF32;
  ir::DType v = ir::DType::kF32;
};

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
  KvCacheTypes cache_types;
  // Rows one @prefill / @decode call appends at most (what runtime::Session and memra bench split
  // prompts into, runtime/PrefillSchedule.h kMaxPrefillChunk). Sizes the sliding-window rings: a
  // layer with window W keeps W + max_call_rows - 1 rows when that is less than the context.
  int64_t max_call_rows = kMaxCallRows;
  static constexpr int64_t kMaxCallRows = 4096;
  static constexpr int64_t kDefaultContext = 4096;
  static constexpr int64_t kKvBlock = 64;
  static constexpr int64_t kMaxSlots = 256;
};

// The context length a module is built for: options.n_ctx, or the default above.
inline int64_t ContextLength(const LowerOptions& options, int64_t n_ctx_train) {
  return options.n_ctx > 0 ? options.n_ctx : std::min(n_ctx_train, LowerOptions::kDefaultContext);
}

}  // namespace memra::frontends

namespace memra::frontends {

// The element types a KV cache may have (KvCacheTypes).
inline bool IsKvCacheType(ir::DType d) {
  return d == ir::DType::kF32 || d == ir::DType::kF16 || d == ir::DType::kBF16 || d == ir::DType::kQ8_0;
}

// An error naming the flag when a cache type is not one the kernels store (f32, f16, bf16, q8_0),
// or, given the model's head sizes (every attention layer's K and V rows), when q8_0 blocks would
// not tile a head's row.
inline absl::Status CheckKvCacheTypes(const KvCacheTypes& t, std::initializer_list<int64_t> head_sizes = {}) {
  for (const auto& [flag, d] : {std::pair<const char*, ir::DType>{"--cache-type-k", t.k}, {"--cache-type-v", t.v}}) {
    if (!IsKvCacheType(d))
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": a KV cache of ", ir::DTypeName(d), " is not supported (f32, f16, bf16 or q8_0)"));
    if (d == ir::DType::kQ8_0)
      for (int64_t hd : head_sizes)
        if (hd % 32 != 0)
          return absl::InvalidArgumentError(absl::StrCat(flag, " q8_0: the model's head size ", hd,
                                                         " is not a multiple of 32 (a q8_0 block); use f16 or bf16"));
  }
  return absl::OkStatus();
}

}  // namespace memra::frontends
