// The prefix cache's index (docs/design/prefix-reuse.md): which snapshot rows of a BatchBackend
// hold the state after which token prefix, which prefixes are known (some snapshot's tokens or a
// recently admitted prompt pass that grid point: where a new request branches off an earlier
// one), and the least-recently-used order. Host bookkeeping only; the backend holds the states
// (BatchBackend::SaveSnapshot).
//
// Prefixes are indexed by a chained 64-bit hash at every grid point (the hash of tokens[0, g) is
// mixed from the hash at g - grid and the chunk between); a hit is always confirmed on the tokens
// themselves, so a collision can only misplace a split point (KnownPrefix), never resume a request
// from the wrong state.
//
//   PrefixCache cache(backend.snapshot_rows(), backend.snapshot_grid());
//   PrefixCache::Hit hit = cache.Lookup(prompt, limit);   // row -1: none
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace memra::runtime {

class PrefixCache {
 public:
  // `rows` snapshot rows, positions on multiples of `grid` (> 0).
  PrefixCache(int rows, int64_t grid);

  int rows() const { return static_cast<int>(entries_.size()); }
  int64_t grid() const { return grid_; }
  int used() const { return used_; }

  struct Hit {
    int row = -1;
    int64_t position = 0;  // the snapshot holds the state after tokens[0, position)
  };
  // The longest snapshot of a prefix of `tokens` ending at or before `limit`.
  Hit Lookup(absl::Span<const int32_t> tokens, int64_t limit) const;
  // The largest grid point g <= limit such that tokens[0, g) is a prefix of some snapshot's
  // tokens or of a remembered prompt (by hash): a branch point worth a snapshot. 0: none.
  int64_t KnownPrefix(absl::Span<const int32_t> tokens, int64_t limit) const;
  // Remembers `tokens`' grid prefixes (no state) for KnownPrefix; the oldest of more than
  // kRememberedPrompts are forgotten.
  void Remember(absl::Span<const int32_t> tokens);
  static constexpr int kRememberedPrompts = 1024;
  // The row holding exactly tokens[0, position), or -1.
  int Find(absl::Span<const int32_t> tokens, int64_t position) const;

  // Marks `row` used now (LRU order).
  void Touch(int row);
  // A free row, or -1 when every row holds a snapshot.
  int FreeRow() const;
  // The least recently used row that holds a snapshot, or -1 when none does.
  int LeastRecentlyUsed() const;
  // Records that `row` now holds the state after tokens[0, position) (replacing what it held);
  // returns the entry's serial number (unique over the cache's life).
  uint64_t Set(int row, absl::Span<const int32_t> tokens, int64_t position);
  // Forgets what `row` holds.
  void Erase(int row);
  // The serial number of what `row` holds (0: empty).
  uint64_t serial(int row) const { return entries_[row].serial; }

 private:
  struct Entry {
    uint64_t serial = 0;  // 0: empty
    int64_t position = 0;
    uint64_t last_use = 0;
    std::vector<int32_t> tokens;   // tokens[0, position)
    std::vector<uint64_t> hashes;  // the chain at grid, 2 grid, ..., position
  };
  // The hash chain of tokens[0, g) for every grid point g <= limit (element k: g = (k+1) grid).
  std::vector<uint64_t> Chain(absl::Span<const int32_t> tokens, int64_t limit) const;

  int64_t grid_;
  std::vector<Entry> entries_;
  int used_ = 0;
  uint64_t clock_ = 0, next_serial_ = 1;
  absl::flat_hash_map<uint64_t, int> known_;            // chain hash -> how many entries pass it
  absl::flat_hash_map<uint64_t, std::vector<int>> at_;  // chain hash at an entry's end -> rows
  absl::flat_hash_map<uint64_t, int> seen_;             // chain hash -> remembered prompts passing it
  std::deque<std::vector<uint64_t>> remembered_;        // their chains, oldest first
};

}  // namespace memra::runtime
