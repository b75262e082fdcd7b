// What the Scheduler (runtime/Scheduler.h) asks of an engine: a pool of sequence slots, each
// with its own state (KV cache, conv ring, delta-net state, position), and one operation that
// runs a step, a flat batch of token runs from several slots (docs/design/sequences.md §5).
//
// Implementations: runtime/BatchedSlots.h (the batched engine: one @step call per step over all
// entries, CPU or CUDA) and runtime/SessionSlots.h (one CPU Session per slot, entries one after
// another: the tests' reference).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/Sampling.h"

namespace memra::runtime {

// sequences.md §5's seq_kind: which kernel class a run's rows belong to, and whether it is
// sampled (decode rows and the last chunk of a prompt are; other prompt chunks only fill state).
enum class EntryKind {
  kDecode = 1,           // one generated token, sampled
  kPromptChunk = 2,      // prompt rows that do not end the prompt
  kLastPromptChunk = 3,  // prompt rows that end it, sampled (the last row's logits)
};

// One entry of a step: `tokens` run in `slot` at positions first_pos, first_pos + 1, ...
struct StepEntry {
  int slot = 0;
  int64_t first_pos = 0;
  EntryKind kind = EntryKind::kDecode;
  std::vector<int32_t> tokens;
  int64_t request = 0;  // the scheduler's request id (for traces and tests; backends ignore it)
  // A sampled entry's sampler inputs for this token (kernels/cpu/Sampling.h SampleRow; the
  // scheduler draws u). device_pick: the backend may pick the token itself from them and return it
  // alone (EntryOutput::token); set only when the request needs no logprobs and its penalty list
  // fits device_sampler_penalties().
  kernels::cpu::RowSampling sampling;
  bool device_pick = false;
  bool sampled() const { return kind != EntryKind::kPromptChunk; }
};

// What a step gives back for one entry (nothing for an entry that is not sampled).
struct EntryOutput {
  std::vector<float> logits;  // the n_vocab logits of the entry's last row, unless `token` is set
  // The backend's pick for a device_pick entry (SampleRow on `sampling`), or -1.
  int32_t token = -1;
  // The backend's pick saw a NaN or inf among the logits (token and logits then unset).
  bool non_finite = false;
};

// A step: decode entries first, then prompt chunks in admission order (the §5 entry order).
// Every slot appears at most once.
struct StepBatch {
  std::vector<StepEntry> entries;
  int64_t rows() const {
    int64_t n = 0;
    for (const auto& e : entries) n += static_cast<int64_t>(e.tokens.size());
    return n;
  }
};

// How a backend's steps must be cut (docs/design/sequences.md §8): the exact decode class
// (kernels/cuda/DecodeClass.h) keeps decode rows and prompt rows in steps of their own, and decode
// steps within the rows whose products do not change kernels.
struct StepRules {
  bool separate_decode = false;  // a step holds decode entries or prompt chunks, never both
  int64_t max_decode_rows = 0;   // decode entries a step holds at most; 0: no limit of its own
};

// What a backend's sequence state occupies (for a server's metrics).
struct BackendMemory {
  int64_t kv_blocks = 0, kv_blocks_used = 0;  // paged KV blocks in the pool / in use (slots and snapshots)
  uint64_t kv_bytes = 0;                      // the KV pool
  uint64_t recurrent_bytes = 0;               // conv rings + delta-net states of every slot
  int64_t snapshot_kv_blocks = 0;             // KV blocks held only by prefix-cache snapshots
  uint64_t snapshot_bytes = 0;                // the snapshot rows' recurrent-state store
};

class BatchBackend {
 public:
  virtual ~BatchBackend() = default;
  virtual int slots() const = 0;
  // Positions each slot holds (prompt + generated tokens of one sequence).
  virtual int64_t ctx_per_slot() const = 0;
  virtual int64_t n_vocab() const = 0;
  // Zeroes slot `slot`'s state (position 0) and releases its reservation: the next sequence there
  // starts fresh.
  virtual absl::Status ResetSlot(int slot) = 0;
  // KV room promised at admission (docs/design/sequences.md §11), so a running sequence never runs
  // out of cache (there is no preemption): the scheduler reserves prompt + max_tokens positions for
  // `slot` before the sequence's first step. false: not now (the request waits in the queue until
  // others finish); an error: never (more than the cache holds; the scheduler refuses such a
  // request at Submit by max_sequence_positions()). The default promises every slot its context.
  virtual absl::StatusOr<bool> Reserve(int slot, int64_t positions) {
    (void)slot;
    (void)positions;
    return true;
  }
  // The most positions one sequence can be promised: ctx_per_slot(), or less when the KV cache is
  // smaller than one slot's context.
  virtual int64_t max_sequence_positions() const { return ctx_per_slot(); }
  virtual BackendMemory memory() const { return {}; }
  virtual StepRules step_rules() const { return {}; }
  // Penalty entries a device_pick entry may carry; -1: the backend never picks (it returns logits).
  virtual int64_t device_sampler_penalties() const { return -1; }

  // Prefix reuse (docs/design/prefix-reuse.md): snapshot rows, each a copy of one slot's recurrent
  // state (conv rings, delta-net states) at a position on the grid, plus references to the slot's
  // KV blocks before that position (those rows never change again, so they are shared, not
  // copied). The scheduler's PrefixCache decides which rows hold what. 0 rows: no reuse.
  virtual int snapshot_rows() const { return 0; }
  // Positions a snapshot may be taken at are multiples of this (the KV block size).
  virtual int64_t snapshot_grid() const { return 0; }
  // Copies `slot`'s state at its current position (a multiple of snapshot_grid()) into `row`,
  // replacing what the row held.
  virtual absl::Status SaveSnapshot(int slot, int row) {
    (void)slot;
    (void)row;
    return absl::UnimplementedError("this backend keeps no snapshots");
  }
  // Gives the fresh `slot` (position 0, nothing reserved) the state of `row`: the slot then holds
  // the row's positions (returned) and continues from there. The row is unchanged.
  virtual absl::StatusOr<int64_t> RestoreSnapshot(int row, int slot) {
    (void)row;
    (void)slot;
    return absl::UnimplementedError("this backend keeps no snapshots");
  }
  // Empties `row`, releasing its KV blocks that no slot or other row holds.
  virtual absl::Status DropSnapshot(int row) {
    (void)row;
    return absl::UnimplementedError("this backend keeps no snapshots");
  }

  // Runs every entry of `batch`, each continuing its slot's sequence (first_pos must equal the
  // slot's position). Returns one output per entry, in entry order: for a sampled() entry the
  // n_vocab logits of its last row or, when it is device_pick, possibly the backend's pick;
  // nothing otherwise.
  virtual absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) = 0;
};

}  // namespace memra::runtime
