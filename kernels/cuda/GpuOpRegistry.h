// The registry of GPU op units (GpuOps.def) and the selection record on the IR.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Function.h"
#include "ir/Op.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {

// Every unit, in GpuOps.def order.
const std::vector<const GpuOpImpl*>& GpuOpImpls();
const GpuOpImpl* FindGpuOpImpl(absl::string_view name);

// The first unit of GpuOps.def that implements `op` at these shapes on `target`. Errors name the
// op and say why (no unit for the kind, or the unit's refusal). `options`: the module's
// (ReadSelectOptions).
absl::StatusOr<OpSelection> SelectGpuOp(const ir::Op& op, const OpShapes& shapes, const Target& target,
                                        const SelectOptions& options = {});

// Every op kind of every function of `m` (segments aside) has a unit that implements it.
// Unimplemented otherwise, naming the op and its kind ("no CUDA kernel for moe_route yet"): the
// CUDA executor asks before it touches the device, so a module it cannot run (qwen35moe's MoE
// ops today) is refused before any upload, not half way.
absl::Status CheckGpuUnitsImplement(const ir::Module& m);

// The record on an op: `impl`, and for units that launch kernels `kernels` ("<module key>::
// <entry>"), `grid`, `block`, `smem`, plus `gemm = 1`, `gemv = 1`, `scratch_bytes`,
// `workspace_bytes`, `ticket_words` when set.
// Units without device work (aliases) record nothing. Write returns whether an attribute changed.
bool WriteSelection(const OpSelection& s, ir::Op& op);
// nullopt when the op carries no record; an error when the record is malformed (names the op).
absl::StatusOr<std::optional<OpSelection>> ReadSelection(const ir::Op& op);

// The fields of the target a selection depends on, as module attributes (`kernel_arch`,
// `kernel_sm_count`), and the target they describe (nullopt: the module was not selected).
bool WriteSelectionTarget(const Target& t, ir::Module& m);
absl::StatusOr<std::optional<Target>> ReadSelectionTarget(const ir::Module& m);

// The weight mode the selection was made for, as the module attribute `kernel_weights` ("blocks",
// "bf16"); Read gives nullopt for a module never selected and bf16 for one selected before the
// attribute existed (block formats were bf16 copies then).
bool WriteSelectionWeights(WeightMode mode, ir::Module& m);
absl::StatusOr<std::optional<WeightMode>> ReadSelectionWeights(const ir::Module& m);

// select-kernels{last-block-merge} as the module attribute `kernel_last_block_merge` (written
// only when true: 1; absent reads as false, the default since session 37), read back by
// SelectionsOf and WorkspaceBytesOf (so a plan's kernel table re-derives the records it was
// compiled with). A module selected before session 37 with the merge (then the default, no
// attribute) re-derives the combine form and its plan is refused as stale: recompile it (its
// kernel sources' hashes changed in that session too).
bool WriteLastBlockMerge(bool merge, ir::Module& m);
bool ReadLastBlockMerge(const ir::Module& m);

// select-kernels{delta-step-split} as the module attribute `kernel_delta_step_split` (written only
// when not 1; absent reads as 1). Read refuses a value other than 1, 2, 4 or 8.
absl::Status CheckDeltaStepSplit(int64_t split);  // InvalidArgument naming the value
bool WriteDeltaStepSplit(int split, ir::Module& m);
absl::StatusOr<int> ReadDeltaStepSplit(const ir::Module& m);

// select-kernels{gemv-warp-bytes} as the module attribute `kernel_gemv_warp_bytes` (written only
// when not the default, 16384; absent reads as it). Check and Read refuse a value outside 0..65536.
absl::Status CheckGemvWarpBytes(int64_t bytes);  // InvalidArgument naming the value
bool WriteGemvWarpBytes(int bytes, ir::Module& m);
absl::StatusOr<int> ReadGemvWarpBytes(const ir::Module& m);

// select-kernels{gemv-splitk-max-k} as the module attribute `kernel_gemv_splitk_max_k` (written
// only when not the default, 12288; absent reads as it). Check and Read refuse a value outside 0..65536.
absl::Status CheckGemvSplitKMaxK(int64_t k);
bool WriteGemvSplitKMaxK(int k, ir::Module& m);
absl::StatusOr<int> ReadGemvSplitKMaxK(const ir::Module& m);

// select-kernels{l2-prefetch-bytes} as the module attribute `kernel_l2_prefetch_bytes` (written only
// when not 0; absent reads as 0). Check and Read refuse a value outside 0..kMaxL2PrefetchBytes.
constexpr int64_t kMaxL2PrefetchBytes = int64_t{1} << 30;
absl::Status CheckL2PrefetchBytes(int64_t bytes);  // InvalidArgument naming the value
bool WriteL2PrefetchBytes(int bytes, ir::Module& m);
absl::StatusOr<int> ReadL2PrefetchBytes(const ir::Module& m);

// select-kernels{gemv-q-blocks-per-sm} as the module attribute `kernel_gemv_q_blocks_per_sm` (written
// only when not 0; absent reads as 0). Check and Read refuse a value outside 0..kMaxGemvQBlocksPerSm.
constexpr int64_t kMaxGemvQBlocksPerSm = 8;
absl::Status CheckGemvQBlocksPerSm(int64_t blocks);  // InvalidArgument naming the value
bool WriteGemvQBlocksPerSm(int blocks, ir::Module& m);
absl::StatusOr<int> ReadGemvQBlocksPerSm(const ir::Module& m);

// Every option of `o` as the module's attributes, each written only when it differs from
// SelectOptions{}'s value (so absent reads as the default): the integer ones above, and the boolean
// ones as 1 / 0: kernel_combine_early_loads, kernel_gemv_evict_first, kernel_step_early_loads,
// kernel_gemv_q_x_early, kernel_gemv_q_pair_dot (select-kernels{combine-early-loads}, ...). True
// when any changed. The decode class is written by WriteDecodeClass.
bool WriteSelectOptions(const SelectOptions& o, ir::Module& m);

// Every module-wide selection option the module records (decode class, last-block merge, delta
// step split, gemv warp bytes): what SelectionsOf and WorkspaceBytesOf select with.
absl::StatusOr<SelectOptions> ReadSelectOptions(const ir::Module& m);

// Whether every argument and result of `fn` has a static shape (a bucket function or @decode):
// the functions select-kernels annotates and the plan's kernel table covers.
bool IsStaticFunction(const ir::Function& fn);

// The selections of every op of a static function at `bucket`: the recorded ones when the
// function carries them (every op that does device work must), else selected now for `target`
// with matrices laid out for `weights` and the decode class of the function's module.
absl::StatusOr<std::vector<OpSelection>> SelectionsOf(const ir::Function& fn, int64_t bucket, const Target& target,
                                                      WeightMode weights, bool use_records);

// The workspace an executor of `m` needs: the largest workspace_bytes of any op's selection (a
// static function at its bucket, from its records when `use_records`; a symbolic one at buckets 1
// and 16, since a unit's workspace does not grow with the bucket). Errors: a matrix whose type has
// no layout under `weights`; an op no unit takes counts 0 (building its program reports it).
absl::StatusOr<int64_t> WorkspaceBytesOf(const ir::Module& m, const Target& target, WeightMode weights,
                                         bool use_records);

// The device greedy step closing the decode loop (Norm.cu `greedy_next`) for a decode function
// returning f32[1, V].
absl::StatusOr<Launch> GreedyNextLaunch(const ir::Function& decode, const Target& target);
// The most blocks greedy_next splits a row over (its partials: 3 ints each, in the token ring).
inline constexpr int64_t kGreedyNextMaxBlocks = 128;

}  // namespace memra::kernels::cuda
