// Static activation memory of a function: every function argument and op result gets a fixed
// byte offset in one arena per function (per bucket, after bucket-shapes). Buffers whose
// lifetimes do not overlap share memory; `reshape` results alias their input (no memory of
// their own), and so do the results of a `split` / `view` that are contiguous slices of their
// input (every dim before the axis is 1, e.g. the decode step's [1, C] splits; each slice at an
// aligned byte offset): they alias it at that offset. plan-memory records the layout in the IR:
//
//   func @prefill_t64(...) attributes {arena_align = 256, arena_args = [0], arena_bytes = 81920,
//                                      arena_naive_bytes = 412672, bucket = 64} {
//     %x = embed(%tokens, @token_embd.weight) {arena = [256]} : f32[64, 64]
//
// `arena` holds one offset per result (an alias: its root's offset plus its slice offset). An op carrying
// `scratch_bytes = N` (set by a backend before plan-memory, e.g. for a GEMM's activation cast)
// also gets N bytes live during its own step only, recorded as `scratch = offset`. A result with
// a q8 companion (ir/ResultBuffer.h) gets its buffer's full bytes. Lifetimes are program-order
// step intervals [definition, last use] (function results live to the end, arguments from the
// start); an op's inputs and outputs are live together at its step, so no op writes over its own
// inputs. Fixed offsets are what make CUDA-graph capture valid (the addresses baked into a graph
// stay right on replay) and give GEMM libraries stable alignment.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Function.h"

namespace memra::passes {

struct ArenaBuffer {
  const ir::Value* value = nullptr;
  int64_t offset = 0;
  int64_t bytes = 0;                    // rounded up to the alignment; 0 for an alias
  int64_t first = 0;                    // program-order step of the definition (-1: an argument)
  int64_t last = 0;                     // last step that reads it (aliases count for their root)
  const ir::Value* alias_of = nullptr;  // the root value of an alias (reshape, slice)
  int64_t alias_offset = 0;             // bytes from the root's offset (slices)
  const ir::Op* scratch_of = nullptr;   // a scratch buffer of this op (value is nullptr)
};

struct ArenaPlan {
  int64_t arena_bytes = 0;  // peak: the arena's size
  int64_t naive_bytes = 0;  // sum of all buffers (what allocating each one separately costs)
  int64_t alignment = 256;
  std::vector<ArenaBuffer> buffers;  // arguments, then results in program order
};

// Bytes of one element of an activation dtype (f32 4, i32 4, bf16 2, ...).
int64_t ElementBytes(ir::DType dtype);

// When every result of `op` (a split or view with static shapes) is a contiguous slice of its
// input starting at a multiple of `alignment` bytes: the byte offset of each result in the
// input. nullopt otherwise. plan-memory aliases such results, and the CUDA split_view unit then
// launches nothing (both ask this).
std::optional<std::vector<int64_t>> SliceViewOffsets(const ir::Op& op, int64_t alignment);

// Liveness and greedy placement (largest buffers first, each at the lowest aligned offset that
// overlaps no buffer live at the same time). Errors: symbolic shapes (run bucket-shapes first).
absl::StatusOr<ArenaPlan> ComputeArenaPlan(const ir::Function& f, int64_t alignment);

// The plan that plan-memory recorded in `f`'s attributes (nullopt when `f` has none). Lifetimes
// are recomputed from the IR.
absl::StatusOr<std::optional<ArenaPlan>> ReadArenaPlan(const ir::Function& f);

// Checks a plan: every non-alias buffer lies inside the arena, is aligned, and overlaps no buffer
// whose lifetime overlaps its own. The error names both values.
absl::Status CheckArenaPlan(const ArenaPlan& plan);

}  // namespace memra::passes
