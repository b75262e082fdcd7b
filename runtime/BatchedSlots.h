// The batched executor behind BatchBackend (docs/design/sequences.md): one module lowered with
// `slots` sequences (frontends::LowerOptions::slots: per-slot recurrent state, a paged KV cache,
// one @step function), one executor (CPU or CUDA) holding the weights once, and every step of
// the scheduler one call of @step with all its entries' rows: token-wise work (GEMMs, norms, MoE)
// runs over the whole flat batch, so B decode rows read each weight once.
//
// The host keeps what the device does not need to decide: the position of every slot (a mirror
// of the device counters, checked against each entry) and the KV block pool (a free list; a slot
// gets blocks as its sequence grows, written into the device block table before the step that
// needs them, and returns them at ResetSlot). On the GPU a step runs the @step_tN bucket of its
// row count (rows padded, padding rows marked tok_seq = -1), each bucket one CUDA graph after its
// first call.
//
//   BatchedSlotsOptions o;  o.slots = 8;  o.backend = Backend::kCuda;
//   auto backend = BatchedSlots::Open("model.gguf", o);
//   auto sched = Scheduler::Create(**backend, {});
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/LowerOptions.h"
#include "ir/Module.h"
#include "kernels/cuda/DecodeClass.h"
#include "runtime/BatchBackend.h"
#include "runtime/Executor.h"

namespace memra::gguf {
class GgufFile;
}
namespace memra::tokenizer {
class Tokenizer;
}

namespace memra::runtime {

struct BatchedSlotsOptions {
  int slots = 4;                        // sequences at once, 1 .. 256
  int64_t n_ctx = 0;                    // positions per slot; 0: min(the model's, 4096)
  frontends::KvCacheTypes cache_types;  // the KV pool's element types (-ctk / -ctv)
  int64_t kv_blocks = 0;                // 64-token blocks in the KV pool; 0: every slot can fill its context
  Backend backend = Backend::kCpu;
  ExecutorOptions exec;  // threads, weight mode, CUDA options
  // GPU: the row buckets of @step (bucket-shapes' ladder); a step of more rows than the largest
  // is refused (the scheduler's step_tokens must not exceed it).
  std::string step_buckets = "1:2:4:8:16:32:64:128:256:384:512";
  // GPU: run every step bucket twice on an empty batch at open (no state changes), so its kernels
  // are compiled and its CUDA graph captured before the first request (and outside timings).
  bool warm_buckets = true;
  // The prefix cache's store of recurrent-state snapshots (BatchBackend::snapshot_rows), in
  // bytes: as many rows as fit, at most 4 per slot; 0: no prefix reuse.
  int64_t snapshot_bytes = 0;
  // Tensor-parallel ranks the model is split over (shard-tensor-parallel in front of the
  // pipeline; runtime/TensorParallelExecutor.h runs them); sizes above are each rank's.
  int tp = 1;
  // The rows' numeric class (kernels/cuda/DecodeClass.h, select-kernels' decode-class): exact
  // makes greedy requests batch-invariant on the GPU (step_rules() then keeps decode and prompt
  // steps apart, decode steps of at most 8 rows, prompt steps padded to a bucket past 8). The CPU's
  // kernels are row-wise in either class; exact cuts its steps the same way there.
  kernels::cuda::DecodeClass decode_class = kernels::cuda::DecodeClass::kBucket;
};

class BatchedSlots : public BatchBackend {
 public:
  static absl::StatusOr<std::unique_ptr<BatchedSlots>> Open(const std::string& path,
                                                            const BatchedSlotsOptions& options = {});
  ~BatchedSlots() override;

  int slots() const override { return slots_; }
  int64_t ctx_per_slot() const override { return n_ctx_; }
  int64_t n_vocab() const override { return n_vocab_; }
  absl::Status ResetSlot(int slot) override;
  // Reserves ceil(positions / 64) blocks for `slot` against the free pool minus what other slots
  // hold in reserve; a slot then grows into its reservation whatever else runs.
  absl::StatusOr<bool> Reserve(int slot, int64_t positions) override;
  int64_t max_sequence_positions() const override { return std::min(n_ctx_, n_blocks_ * block_); }
  int64_t device_sampler_penalties() const override { return sampler_penalties_; }
  StepRules step_rules() const override;
  kernels::cuda::DecodeClass decode_class() const { return decode_class_; }
  BackendMemory memory() const override;
  int snapshot_rows() const override { return static_cast<int>(snap_pos_.size()); }
  int64_t snapshot_grid() const override { return block_; }
  absl::Status SaveSnapshot(int slot, int row) override;
  absl::StatusOr<int64_t> RestoreSnapshot(int row, int slot) override;
  absl::Status DropSnapshot(int row) override;
  absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override;

  // The most rows one step may hold (the largest bucket on the GPU; unbounded on the CPU).
  int64_t max_step_rows() const { return max_rows_; }
  int64_t free_kv_blocks() const { return static_cast<int64_t>(free_blocks_.size()); }
  // Free blocks not promised to a slot's reservation.
  int64_t unreserved_kv_blocks() const { return free_kv_blocks() - Outstanding(-1); }
  int64_t kv_blocks() const { return n_blocks_; }
  const ir::Module& module() const { return *module_; }
  Executor& executor() { return *exec_; }
  // The model's tokenizer, or null when the GGUF has none usable.
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }

 private:
  BatchedSlots() = default;
  absl::Status Init(const BatchedSlotsOptions& options);
  // Runs `fn` (a bucket of `rows`) on a batch of padding rows only: it touches no state.
  absl::Status RunEmpty(const std::string& fn, int64_t rows);
  // Gives `slot` blocks up to position `last` (inclusive), writing the new table entries.
  absl::Status GrowBlocks(int slot, int64_t last);
  // Blocks reserved but not yet taken, over every slot but `except`.
  int64_t Outstanding(int except) const;
  // Drops one owner of each block; a block nobody owns returns to the free list.
  void ReleaseBlocks(const std::vector<int32_t>& blocks);
  absl::Status CheckSnapshotRow(int row) const;
  // Copies `slot`'s recurrent states to snapshot row `row` (to_stash) or back.
  absl::Status CopyRecurrent(int slot, int row, bool to_stash);

  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  int slots_ = 0;
  int64_t n_ctx_ = 0, n_vocab_ = 0, block_ = 0, max_blocks_ = 0, n_blocks_ = 0;
  int64_t max_rows_ = 0;
  kernels::cuda::DecodeClass decode_class_ = kernels::cuda::DecodeClass::kBucket;
  int64_t min_prompt_rows_ = 1;    // exact class on the GPU: a prompt step's bucket has more rows than a decode one
  int64_t sampler_penalties_ = 0;  // @step's penalty entries per row (the module's sampler_penalties)
  uint64_t kv_bytes_ = 0, recurrent_bytes_ = 0;           // StateBytesOf the module
  std::vector<std::pair<int64_t, std::string>> buckets_;  // (rows, function), ascending; empty: @step
  std::vector<int64_t> pos_;                              // per slot: positions held
  std::vector<std::vector<int32_t>> slot_blocks_;         // per slot: its blocks in order
  std::vector<int32_t> free_blocks_;                      // LIFO
  std::vector<int32_t> block_owners_;                     // per block: slots + snapshot rows holding it
  std::vector<int64_t> reserved_;                         // per slot: blocks promised (0: none)
  std::vector<std::string> recurrent_states_;             // per-slot state names (conv, delta)
  std::vector<int64_t> recurrent_slot_bytes_;             // per recurrent state: one slot's bytes
  int64_t snapshot_row_bytes_ = 0;                        // one slot's recurrent state, all layers
  std::vector<int64_t> snap_pos_;                         // per snapshot row: position, -1 empty
  std::vector<std::vector<int32_t>> snap_blocks_;         // per snapshot row: its KV blocks
};

}  // namespace memra::runtime
