// How a prompt of t tokens is split into prefill chunks (half-open token ranges [start, end)).
// Ported from the seed engine's schedule (design/seed/part1.md §1.4, part5.md §3), whose tests
// pin the exact shapes; tests/qwen35/PrefillSchedule_test.cc repeats them.
//
// The CPU executor gives identical logits for any split (every kernel computes a token's result
// in the same order whatever the batch), so `memra run --chunk N` uses the fixed schedule as
// given; the grid alignment matters for chunked GPU delta-net scans, whose results match the
// monolithic scan only when internal boundaries are multiples of the scan chunk.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "frontends/LowerOptions.h"

namespace memra::runtime {

using TokenRange = std::pair<int64_t, int64_t>;  // [start, end)

// Never emit a chunk shorter than this (except a prompt that is shorter).
inline constexpr int64_t kMinPrefillChunk = 16;
// The largest chunk a prefill call takes (what the lowering sizes sliding-window rings for; a
// module lowered with a smaller LowerOptions::max_call_rows records it as "max_call_rows").
inline constexpr int64_t kMaxPrefillChunk = frontends::LowerOptions::kMaxCallRows;

// Steps of `chunk` tokens. chunk <= 0 or t <= chunk: one range [0, t). A tail shorter than 16
// tokens is merged into the previous chunk (ring_on = false), or, with ring_on, the previous
// boundary moves down so the last chunk is exactly 16 tokens.
std::vector<TokenRange> FixedPrefillChunks(int64_t t, int64_t chunk, bool ring_on = false);

// Modelled cost of a chunk ending at p of a t-token prompt: quadratic attention + linear work.
unsigned __int128 PrefillChunkWork(int64_t p, int64_t t);

// The "short fill, equal modelled time" schedule: keeps the number of chunks of `fixed` (returned
// unchanged when it has fewer than 3), makes the first chunk min(max(ceil(fill_chunk/2), 64),
// t-(n-1)*16) tokens and places every later boundary so that each chunk models equal work.
std::vector<TokenRange> DynamicPrefillChunks(int64_t t, int64_t fill_chunk, const std::vector<TokenRange>& fixed);

// Floors every internal boundary to a multiple of c (the delta-net scan chunk); a range that
// collapses merges into the next; the last range always ends at t. c == 0 or a single range:
// unchanged.
std::vector<TokenRange> AlignPrefillChunksToGrid(const std::vector<TokenRange>& ranges, int64_t t, int64_t c);

}  // namespace memra::runtime
