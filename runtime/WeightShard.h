// A rank's slice of a weight of a tensor-parallel module (shard-tensor-parallel,
// docs/design/tensor-parallel.md). The pass declares the weight with its local shape and records
// how it was cut as attributes of the weight:
//
//   weight @blk.0.attn_qkv.weight : q8_0[128, 256] {shard_axis = 0, shard_segments = [64, 64, 128],
//                                                  shard_parts = 2}
//
// Along IR axis `shard_axis` the stored tensor is a run of segments (their global sizes, summing to
// the stored dim); each segment is cut into `shard_parts` equal parts and part p of every segment,
// in order, is the local tensor. Rank r of tp reads part r * shard_parts / tp: parts < tp
// replicates a part over tp / parts ranks (KV heads fewer than the ranks).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Value.h"

namespace memra::runtime {

struct WeightShard {
  int64_t axis = 0;               // IR axis (ggml ne index rank - 1 - axis)
  std::vector<int64_t> segments;  // global sizes along the axis
  int64_t parts = 1;
  // The part rank `rank` of `tp` reads.
  int64_t PartOf(int rank, int tp) const { return static_cast<int64_t>(rank) * parts / tp; }
};

// The weight's shard (nullopt: every rank reads it whole); an error for malformed attributes.
absl::StatusOr<std::optional<WeightShard>> ShardOf(const ir::Weight& w);

// Rank `rank`'s slice of the stored tensor `t`: its ggml ne and its bytes (rows of quantized types
// cut on block boundaries; an error naming the tensor otherwise, and when the parts do not divide
// the ranks: a module cut for 2 run as 1 rank is refused, not run on half its weights).
struct TensorSlice {
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};
absl::StatusOr<TensorSlice> SliceTensor(const gguf::TensorInfo& t, const WeightShard& shard, int rank, int tp);

}  // namespace memra::runtime
