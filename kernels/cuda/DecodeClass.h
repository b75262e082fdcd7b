// The numeric class of a batched engine's rows (docs/design/sequences.md §8): which product
// kernels a row may meet, recorded on the module by select-kernels (`decode_class`) and read by the
// CUDA executor (cuBLASLt's algorithm choice) and runtime/BatchedSlots (how steps are cut).
//
//   bucket  the default and the fastest: a step's products follow its row bucket (the block
//           GEMVs at T <= 8, the one-token 16-bit GEMV at T = 1, cuBLASLt with the heuristic's
//           algorithm per M above), so a row's logits depend, within the op table's bounds, on
//           what else ran in its step.
//   exact   batch-invariant: a greedy request gives the same tokens, bit for bit, alone and in
//           any mix. Decode rows run in steps of their own of at most kExactDecodeRows rows, where
//           every product on blocks is a GEMV whose per-row arithmetic does not depend on T;
//           prompt rows run in steps of their own padded past that limit; products on 16-bit or
//           f32 weights run on Gemv.cu at T <= 8 with each token's arithmetic that of one
//           (GEMV_T) and on cuBLASLt above, with one algorithm pinned per weight shape for every M
//           (no split-K), so a row's result does not depend on the rows beside it.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"

namespace memra::kernels::cuda {

enum class DecodeClass { kBucket, kExact };

// "bucket", "exact"
absl::string_view DecodeClassName(DecodeClass c);
// Errors name the value and the choices.
absl::StatusOr<DecodeClass> ParseDecodeClass(absl::string_view name);

// Decode rows a step of the exact class holds at most: the block GEMVs' token limit
// (GemvQuant.cc), past which a product would change kernels.
inline constexpr int64_t kExactDecodeRows = 8;

// The module attribute (`decode_class`, written only for exact); Write returns whether it changed.
// A module without it (bucket, selected before it existed, or a CPU module) reads as kBucket.
bool WriteDecodeClass(DecodeClass c, ir::Module& m);
absl::StatusOr<DecodeClass> ReadDecodeClass(const ir::Module& m);

}  // namespace memra::kernels::cuda
