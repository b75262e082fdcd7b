#include "runtime/BatchedSlots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/SelectKernelsPass.h"
#include "frontends/LowerOptions.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "ir/DType.h"
#include "ir/StatusMacros.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/StateMemory.h"

namespace memra::runtime {

BatchedSlots::~BatchedSlots() {
  // The executor references the module and the file.
  exec_.reset();
  module_.reset();
}

absl::StatusOr<std::unique_ptr<BatchedSlots>> BatchedSlots::Open(const std::string& path,
                                                                 const BatchedSlotsOptions& options) {
  if (options.slots < 1 || options.slots > frontends::LowerOptions::kMaxSlots)
    return absl::InvalidArgumentError(
        absl::StrCat("slots must be in [1, ", frontends::LowerOptions::kMaxSlots, "] (got ", options.slots, ")"));
  std::unique_ptr<BatchedSlots> b(new BatchedSlots());
  MEMRA_ASSIGN_OR_RETURN(b->file_, gguf::GgufFile::Open(path));
  frontends::LowerOptions lo;
  lo.n_ctx = options.n_ctx;
  lo.cache_types = options.cache_types;
  lo.slots = options.slots;
  lo.kv_blocks = options.kv_blocks;
  MEMRA_ASSIGN_OR_RETURN(b->module_, frontends::LowerModel(*b->file_, lo));
  MEMRA_RETURN_IF_ERROR(b->Init(options));
  return b;
}

absl::Status BatchedSlots::Init(const BatchedSlotsOptions& options) {
  ir::Module& m = *module_;
  // The backend's pipeline; on the GPU @step becomes one static function per row bucket.
  passes::PassManagerOptions pm;
  pm.input_name = file_->path();
  pm.pipeline = std::string(passes::kDefaultPipeline);
  if (options.backend == Backend::kCuda) {
    codegen::RegisterCodegenPasses();  // select-kernels lives in codegen (SelectKernelsPass.h)
    MEMRA_ASSIGN_OR_RETURN(kernels::cuda::Target target, CudaDeviceTarget(options.exec.cuda.device));
    const char* weights = options.exec.cuda.weights == kernels::cuda::WeightMode::kBf16 ? "bf16" : "blocks";
    pm.pipeline = passes::StepPipeline(passes::PipelineForTarget(target.ArchName(), target.sm_count, weights,
                                                                 kernels::cuda::DecodeClassName(options.decode_class)),
                                       options.step_buckets);
  }
  pm.pipeline = passes::WithTensorParallel(pm.pipeline, options.tp);
  MEMRA_ASSIGN_OR_RETURN(auto manager, passes::PassManager::Create(pm));
  MEMRA_RETURN_IF_ERROR(manager->Run(m));

  slots_ = static_cast<int>(m.attrs().I64Or("slots", 0));
  n_ctx_ = m.attrs().I64Or("n_ctx", 0);
  n_vocab_ = m.attrs().I64Or("n_vocab", 0);
  block_ = m.attrs().I64Or("kv_block", 0);
  n_blocks_ = m.attrs().I64Or("kv_blocks", 0);
  const ir::StateVar* table = m.state("kv_blocks");
  if (slots_ <= 0 || block_ <= 0 || table == nullptr)
    return absl::InternalError("the lowered module has no slots or block table");
  max_blocks_ = table->shape()[1].value();
  if (auto bytes = StateBytesOf(m); bytes.ok()) {
    kv_bytes_ = bytes->kv;
    recurrent_bytes_ = bytes->recurrent;
  }
  sampler_penalties_ = m.attrs().I64Or("sampler_penalties", 0);
  if (sampler_penalties_ < 1) return absl::InternalError("the lowered module records no sampler_penalties");
  for (const auto& f : m.functions())
    if (f->attrs().GetString("bucket_of") == std::optional<std::string>("step"))
      buckets_.emplace_back(f->attrs().I64Or("bucket", 0), f->name());
  std::sort(buckets_.begin(), buckets_.end());
  if (buckets_.empty() && m.function("step") == nullptr)
    return absl::InternalError("the compiled module has neither @step nor @step_tN buckets");
  max_rows_ = buckets_.empty() ? INT64_MAX : buckets_.back().first;
  decode_class_ = options.decode_class;
  if (options.backend == Backend::kCuda) {
    MEMRA_ASSIGN_OR_RETURN(const kernels::cuda::DecodeClass selected, kernels::cuda::ReadDecodeClass(m));
    if (selected != decode_class_)
      return absl::InternalError(absl::StrCat("the module's kernels were selected for decode class ",
                                              kernels::cuda::DecodeClassName(selected), ", not ",
                                              kernels::cuda::DecodeClassName(decode_class_)));
  }
  if (decode_class_ == kernels::cuda::DecodeClass::kExact && !buckets_.empty()) {
    // Prompt rows run in buckets past the decode GEMVs' rows, decode rows in buckets within them.
    min_prompt_rows_ = kernels::cuda::kExactDecodeRows + 1;
    const int64_t most_decode = std::min<int64_t>(slots_, kernels::cuda::kExactDecodeRows);
    int64_t decode_bucket = INT64_MAX;  // the bucket a full decode step runs in
    for (const auto& [n, name] : buckets_)
      if (n >= most_decode) {
        decode_bucket = n;
        break;
      }
    if (max_rows_ < min_prompt_rows_ || decode_bucket > kernels::cuda::kExactDecodeRows)
      return absl::InvalidArgumentError(absl::StrCat(
          "decode class exact needs a step bucket of ", most_decode, " to ", kernels::cuda::kExactDecodeRows,
          " rows (decode steps) and one of more than ", kernels::cuda::kExactDecodeRows,
          " (prompt steps); the step buckets run from ", buckets_.front().first, " to ", max_rows_));
  }
  for (const auto& s : m.states())
    if (s->state_kind() == ir::StateKind::kConv || s->state_kind() == ir::StateKind::kDelta) {
      recurrent_states_.push_back(s->name());
      recurrent_slot_bytes_.push_back(
          ir::StorageBytes(s->dtype(), s->shape().NumElements().value_or(0) / slots_).value_or(0));
      snapshot_row_bytes_ += recurrent_slot_bytes_.back();
    }
  if (options.snapshot_bytes < 0)
    return absl::InvalidArgumentError(absl::StrCat("snapshot_bytes must be >= 0 (got ", options.snapshot_bytes, ")"));

  MEMRA_ASSIGN_OR_RETURN(exec_, CreateExecutor(options.backend, m, *file_, options.exec));
  pos_.assign(slots_, 0);
  slot_blocks_.assign(slots_, {});
  reserved_.assign(slots_, 0);
  free_blocks_.clear();
  for (int64_t i = n_blocks_ - 1; i >= 0; --i) free_blocks_.push_back(static_cast<int32_t>(i));
  block_owners_.assign(n_blocks_, 0);
  // A model without recurrent state still snapshots (KV references only) into a token-sized row.
  const int64_t row_bytes = std::max<int64_t>(snapshot_row_bytes_, 1);
  const int64_t rows = std::min<int64_t>(options.snapshot_bytes / row_bytes, int64_t{4} * slots_);
  if (rows > 0) {
    absl::Status st = exec_->AllocateStash(rows * snapshot_row_bytes_);
    if (!st.ok())
      return absl::Status(st.code(), absl::StrCat("the prefix cache's ", rows, " state snapshots of ",
                                                  snapshot_row_bytes_, " bytes (the prefix-cache budget of ",
                                                  options.snapshot_bytes, " bytes): ", st.message()));
    snap_pos_.assign(rows, -1);
    snap_blocks_.assign(rows, {});
  }
  // Every table entry -1 (no block): a row whose block was never given shows up as an error on
  // the CPU and is skipped on the GPU instead of landing in another slot's block 0.
  std::vector<int32_t> none(static_cast<size_t>(slots_ * max_blocks_), -1);
  MEMRA_RETURN_IF_ERROR(exec_->WriteState("kv_blocks", 0, none.data(), none.size() * sizeof(int32_t)));
  auto tok = tokenizer::Tokenizer::FromGguf(*file_);
  if (tok.ok()) tokenizer_ = std::move(*tok);
  if (options.backend == Backend::kCuda && options.warm_buckets)
    for (const auto& [rows, fn] : buckets_)
      for (int i = 0; i < 2; ++i) MEMRA_RETURN_IF_ERROR(RunEmpty(fn, rows));
  return absl::OkStatus();
}

absl::Status BatchedSlots::RunEmpty(const std::string& fn, int64_t rows) {
  std::vector<HostTensor> args;
  args.push_back(HostTensor::FromI32(std::vector<int32_t>(rows, 0), {rows}));
  args.push_back(HostTensor::FromI32(std::vector<int32_t>(rows, -1), {rows}));
  args.push_back(HostTensor::FromI32(std::vector<int32_t>(slots_, -1), {slots_}));
  args.push_back(HostTensor::FromI32(std::vector<int32_t>(slots_ + 1, 0), {slots_ + 1}));
  args.push_back(HostTensor::FromF32(std::vector<float>(slots_ * 8, 0.0f), {slots_, 8}));
  args.push_back(
      HostTensor::FromI32(std::vector<int32_t>(slots_ * 2 * sampler_penalties_, -1), {slots_, 2 * sampler_penalties_}));
  auto r = exec_->RunSelected(fn, std::move(args), {false, false});
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("warming @", fn, ": ", r.status().message()));
  return absl::OkStatus();
}

absl::Status BatchedSlots::ResetSlot(int slot) {
  if (slot < 0 || slot >= slots_)
    return absl::OutOfRangeError(absl::StrCat("slot ", slot, " is outside [0, ", slots_, ")"));
  for (const std::string& name : recurrent_states_) {
    const ir::StateVar* s = module_->state(name);
    const int64_t per_slot = s->shape().NumElements().value_or(0) / slots_ * static_cast<int64_t>(sizeof(float));
    MEMRA_RETURN_IF_ERROR(exec_->WriteState(name, slot * per_slot, nullptr, per_slot));
  }
  MEMRA_RETURN_IF_ERROR(exec_->WriteState("pos", slot * int64_t{sizeof(int32_t)}, nullptr, sizeof(int32_t)));
  std::vector<int32_t>& mine = slot_blocks_[slot];
  if (!mine.empty()) {
    std::vector<int32_t> none(mine.size(), -1);
    MEMRA_RETURN_IF_ERROR(exec_->WriteState("kv_blocks", slot * max_blocks_ * int64_t{sizeof(int32_t)}, none.data(),
                                            none.size() * sizeof(int32_t)));
    ReleaseBlocks(mine);
    mine.clear();
  }
  pos_[slot] = 0;
  reserved_[slot] = 0;
  return absl::OkStatus();
}

int64_t BatchedSlots::Outstanding(int except) const {
  int64_t n = 0;
  for (int s = 0; s < slots_; ++s)
    if (s != except) n += std::max<int64_t>(0, reserved_[s] - static_cast<int64_t>(slot_blocks_[s].size()));
  return n;
}

absl::StatusOr<bool> BatchedSlots::Reserve(int slot, int64_t positions) {
  if (slot < 0 || slot >= slots_)
    return absl::OutOfRangeError(absl::StrCat("slot ", slot, " is outside [0, ", slots_, ")"));
  if (positions < 1 || positions > max_sequence_positions())
    return absl::OutOfRangeError(absl::StrCat("a sequence of ", positions, " positions does not fit: one sequence ",
                                              "holds at most ", max_sequence_positions(), " (context ", n_ctx_,
                                              ", KV cache ", n_blocks_, " blocks of ", block_, ")"));
  const int64_t need = (positions + block_ - 1) / block_;
  const int64_t held = static_cast<int64_t>(slot_blocks_[slot].size());
  if (std::max<int64_t>(0, need - held) > free_kv_blocks() - Outstanding(slot)) return false;
  reserved_[slot] = std::max(need, held);
  return true;
}

absl::Status BatchedSlots::GrowBlocks(int slot, int64_t last) {
  std::vector<int32_t>& mine = slot_blocks_[slot];
  const int64_t need = last / block_ + 1;
  if (need > max_blocks_)
    return absl::OutOfRangeError(absl::StrCat("slot ", slot, ": position ", last, " is past its context of ", n_ctx_));
  if (need <= static_cast<int64_t>(mine.size())) return absl::OkStatus();
  const int64_t more = need - static_cast<int64_t>(mine.size());
  // Other slots' reservations are theirs; this slot may use its own and what nobody reserved.
  const int64_t available = free_kv_blocks() - Outstanding(slot);
  if (more > available)
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: slot ", slot, " needs ", more, " more blocks of ",
                                                     block_, " tokens, ", available, " of ", n_blocks_,
                                                     " are free and not reserved by other slots"));
  const int64_t first = static_cast<int64_t>(mine.size());
  for (int64_t i = 0; i < more; ++i) {
    mine.push_back(free_blocks_.back());
    block_owners_[free_blocks_.back()] = 1;
    free_blocks_.pop_back();
  }
  return exec_->WriteState("kv_blocks", (slot * max_blocks_ + first) * int64_t{sizeof(int32_t)}, mine.data() + first,
                           more * int64_t{sizeof(int32_t)});
}

absl::StatusOr<std::vector<EntryOutput>> BatchedSlots::Execute(const StepBatch& batch) {
  const int64_t n_entries = static_cast<int64_t>(batch.entries.size());
  if (n_entries == 0) return std::vector<EntryOutput>{};
  if (n_entries > slots_)
    return absl::InvalidArgumentError(absl::StrCat("a step of ", n_entries, " entries exceeds the ", slots_, " slots"));
  const int64_t rows = batch.rows();
  if (rows > max_rows_)
    return absl::InvalidArgumentError(
        absl::StrCat("a step of ", rows, " rows exceeds the largest step bucket (", max_rows_, ")"));
  // Check every entry before anything changes.
  std::vector<bool> seen(slots_, false);
  for (int64_t i = 0; i < n_entries; ++i) {
    const StepEntry& e = batch.entries[i];
    auto where = [&] { return absl::StrCat("step entry ", i, " (slot ", e.slot, ", request ", e.request, ")"); };
    if (e.slot < 0 || e.slot >= slots_)
      return absl::OutOfRangeError(absl::StrCat(where(), ": slot outside [0, ", slots_, ")"));
    if (seen[e.slot]) return absl::InvalidArgumentError(absl::StrCat(where(), ": the slot appears twice"));
    seen[e.slot] = true;
    if (e.tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(where(), ": no tokens"));
    if (e.kind == EntryKind::kDecode && e.tokens.size() != 1)
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": a decode entry runs one token (got ", e.tokens.size(), ")"));
    if (e.first_pos != pos_[e.slot])
      return absl::FailedPreconditionError(
          absl::StrCat(where(), ": starts at position ", e.first_pos, " but the slot holds ", pos_[e.slot], " tokens"));
    if (e.first_pos + static_cast<int64_t>(e.tokens.size()) > n_ctx_)
      return absl::OutOfRangeError(absl::StrCat(where(), ": ", e.tokens.size(), " tokens at position ", e.first_pos,
                                                " exceed the slot's context of ", n_ctx_));
    for (int32_t id : e.tokens)
      if (id < 0 || id >= n_vocab_)
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": token id ", id, " is outside the vocabulary [0, ", n_vocab_, ")"));
  }
  // The exact class's cut (step_rules): decode rows alone and few, prompt rows alone.
  int64_t least_rows = rows;
  if (decode_class_ == kernels::cuda::DecodeClass::kExact) {
    int64_t decode = 0;
    for (const StepEntry& e : batch.entries) decode += e.kind == EntryKind::kDecode;
    if (decode > 0 && decode < n_entries)
      return absl::InvalidArgumentError(absl::StrCat("decode class exact: a step of ", decode,
                                                     " decode entries also holds prompt chunks (they run apart)"));
    if (decode > kernels::cuda::kExactDecodeRows)
      return absl::InvalidArgumentError(absl::StrCat("decode class exact: a step of ", decode,
                                                     " decode entries exceeds ", kernels::cuda::kExactDecodeRows));
    if (decode == 0) least_rows = std::max(rows, min_prompt_rows_);
  }
  for (const StepEntry& e : batch.entries)
    MEMRA_RETURN_IF_ERROR(GrowBlocks(e.slot, e.first_pos + static_cast<int64_t>(e.tokens.size()) - 1));

  // The flat batch (ir/Ops.def, "sequences"), padded to the step bucket.
  std::string fn = "step";
  int64_t T = rows;
  for (const auto& [n, name] : buckets_)
    if (n >= least_rows) {
      T = n;
      fn = name;
      break;
    }
  std::vector<int32_t> tokens(T, 0), tok_seq(T, -1), seq_slot(slots_, -1), seq_start(slots_ + 1, 0);
  int64_t r = 0;
  for (int64_t b = 0; b < slots_; ++b) {
    seq_start[b] = static_cast<int32_t>(r);
    if (b >= n_entries) continue;
    const StepEntry& e = batch.entries[b];
    seq_slot[b] = e.slot;
    for (int32_t id : e.tokens) {
      tokens[r] = id;
      tok_seq[r] = static_cast<int32_t>(b);
      ++r;
    }
  }
  seq_start[slots_] = static_cast<int32_t>(r);
  std::vector<HostTensor> args;
  args.push_back(HostTensor::FromI32(tokens, {T}));
  args.push_back(HostTensor::FromI32(tok_seq, {T}));
  args.push_back(HostTensor::FromI32(seq_slot, {slots_}));
  args.push_back(HostTensor::FromI32(seq_start, {slots_ + 1}));
  // The sampler's rows: greedy without penalties for entries that pick nothing.
  const int64_t P = sampler_penalties_;
  std::vector<float> sampling(slots_ * 8, 0.0f);
  std::vector<int32_t> penalties(slots_ * 2 * P, -1);
  for (int64_t b = 0; b < n_entries; ++b) {
    const StepEntry& e = batch.entries[b];
    if (!e.sampled() || !e.device_pick) continue;
    const auto& rs = e.sampling;
    if (static_cast<int64_t>(rs.penalty_ids.size()) > P || rs.penalty_counts.size() != rs.penalty_ids.size())
      return absl::InvalidArgumentError(absl::StrCat("step entry ", b, " (request ", e.request, "): ",
                                                     rs.penalty_ids.size(), " penalty entries for a sampler of ", P));
    std::copy(rs.params, rs.params + 8, sampling.begin() + b * 8);
    std::copy(rs.penalty_ids.begin(), rs.penalty_ids.end(), penalties.begin() + b * 2 * P);
    std::copy(rs.penalty_counts.begin(), rs.penalty_counts.end(), penalties.begin() + b * 2 * P + P);
  }
  args.push_back(HostTensor::FromF32(sampling, {slots_, 8}));
  args.push_back(HostTensor::FromI32(penalties, {slots_, 2 * P}));
  // The logits come to the host only when some sampled entry is picked there.
  bool need_logits = false;
  for (const StepEntry& e : batch.entries) need_logits |= e.sampled() && !e.device_pick;
  MEMRA_ASSIGN_OR_RETURN(std::vector<HostTensor> results, exec_->RunSelected(fn, std::move(args), {need_logits, true}));
  for (const StepEntry& e : batch.entries) pos_[e.slot] += static_cast<int64_t>(e.tokens.size());
  if (results.size() != 2 || results[1].dtype() != ir::DType::kI32 || results[1].numel() != slots_ ||
      (need_logits && (results[0].dtype() != ir::DType::kF32 || results[0].numel() != slots_ * n_vocab_)))
    return absl::InternalError(
        absl::StrCat("@", fn, " returned no [", slots_, ", ", n_vocab_, "] logits and [", slots_, "] picks"));
  std::vector<EntryOutput> out(n_entries);
  const int32_t* picks = results[1].i32();
  for (int64_t b = 0; b < n_entries; ++b) {
    const StepEntry& e = batch.entries[b];
    if (!e.sampled()) continue;
    if (e.device_pick) {
      out[b].token = picks[b];
      out[b].non_finite = picks[b] < 0;
      if (out[b].non_finite) out[b].token = -1;
    } else {
      const float* logits = results[0].f32();
      out[b].logits.assign(logits + b * n_vocab_, logits + (b + 1) * n_vocab_);
    }
  }
  return out;
}

StepRules BatchedSlots::step_rules() const {
  if (decode_class_ != kernels::cuda::DecodeClass::kExact) return {};
  return {true, kernels::cuda::kExactDecodeRows};
}

void BatchedSlots::ReleaseBlocks(const std::vector<int32_t>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    if (--block_owners_[*it] == 0) free_blocks_.push_back(*it);
}

absl::Status BatchedSlots::CheckSnapshotRow(int row) const {
  if (row >= 0 && row < snapshot_rows()) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat("snapshot row ", row, " is outside [0, ", snapshot_rows(), ")"));
}

absl::Status BatchedSlots::CopyRecurrent(int slot, int row, bool to_stash) {
  // A row is every recurrent state's slice of one slot, back to back.
  int64_t offset = 0;
  for (size_t i = 0; i < recurrent_states_.size(); ++i) {
    const int64_t n = recurrent_slot_bytes_[i];
    MEMRA_RETURN_IF_ERROR(
        exec_->CopyStash(recurrent_states_[i], slot * n, row * snapshot_row_bytes_ + offset, n, to_stash));
    offset += n;
  }
  return absl::OkStatus();
}

absl::Status BatchedSlots::SaveSnapshot(int slot, int row) {
  MEMRA_RETURN_IF_ERROR(CheckSnapshotRow(row));
  if (slot < 0 || slot >= slots_)
    return absl::OutOfRangeError(absl::StrCat("slot ", slot, " is outside [0, ", slots_, ")"));
  const int64_t p = pos_[slot];
  if (p <= 0 || p % block_ != 0)
    return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " holds ", p, " positions: a snapshot is taken ",
                                                      "at a positive multiple of the KV block (", block_, ")"));
  MEMRA_RETURN_IF_ERROR(DropSnapshot(row));
  MEMRA_RETURN_IF_ERROR(CopyRecurrent(slot, row, /*to_stash=*/true));
  // Blocks of positions < p are full and never written again: the row shares them.
  std::vector<int32_t>& blocks = snap_blocks_[row];
  blocks.assign(slot_blocks_[slot].begin(), slot_blocks_[slot].begin() + p / block_);
  for (int32_t b : blocks) ++block_owners_[b];
  snap_pos_[row] = p;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> BatchedSlots::RestoreSnapshot(int row, int slot) {
  MEMRA_RETURN_IF_ERROR(CheckSnapshotRow(row));
  if (slot < 0 || slot >= slots_)
    return absl::OutOfRangeError(absl::StrCat("slot ", slot, " is outside [0, ", slots_, ")"));
  const int64_t p = snap_pos_[row];
  if (p < 0) return absl::FailedPreconditionError(absl::StrCat("snapshot row ", row, " is empty"));
  if (pos_[slot] != 0 || !slot_blocks_[slot].empty() || reserved_[slot] != 0)
    return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not fresh (", pos_[slot],
                                                      " positions): a snapshot restores into a reset slot"));
  MEMRA_RETURN_IF_ERROR(CopyRecurrent(slot, row, /*to_stash=*/false));
  const int32_t pos32 = static_cast<int32_t>(p);
  MEMRA_RETURN_IF_ERROR(exec_->WriteState("pos", slot * int64_t{sizeof(int32_t)}, &pos32, sizeof(int32_t)));
  std::vector<int32_t>& mine = slot_blocks_[slot];
  mine = snap_blocks_[row];
  for (int32_t b : mine) ++block_owners_[b];
  MEMRA_RETURN_IF_ERROR(exec_->WriteState("kv_blocks", slot * max_blocks_ * int64_t{sizeof(int32_t)}, mine.data(),
                                          static_cast<int64_t>(mine.size()) * int64_t{sizeof(int32_t)}));
  pos_[slot] = p;
  return p;
}

absl::Status BatchedSlots::DropSnapshot(int row) {
  MEMRA_RETURN_IF_ERROR(CheckSnapshotRow(row));
  ReleaseBlocks(snap_blocks_[row]);
  snap_blocks_[row].clear();
  snap_pos_[row] = -1;
  return absl::OkStatus();
}

BackendMemory BatchedSlots::memory() const {
  BackendMemory m;
  m.kv_blocks = n_blocks_;
  m.kv_blocks_used = n_blocks_ - free_kv_blocks();
  m.kv_bytes = kv_bytes_;
  m.recurrent_bytes = recurrent_bytes_;
  std::vector<bool> in_slot(n_blocks_, false);
  for (const auto& blocks : slot_blocks_)
    for (int32_t b : blocks) in_slot[b] = true;
  std::vector<bool> counted(n_blocks_, false);
  for (const auto& blocks : snap_blocks_)
    for (int32_t b : blocks)
      if (!in_slot[b] && !counted[b]) {
        counted[b] = true;
        ++m.snapshot_kv_blocks;
      }
  m.snapshot_bytes = static_cast<uint64_t>(snapshot_rows()) * snapshot_row_bytes_;
  return m;
}

}  // namespace memra::runtime
