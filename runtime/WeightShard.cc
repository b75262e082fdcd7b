#include "runtime/WeightShard.h"

#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/StatusMacros.h"

namespace memra::runtime {

absl::StatusOr<std::optional<WeightShard>> ShardOf(const ir::Weight& w) {
  const ir::AttrDict& a = w.attrs();
  std::optional<int64_t> axis = a.GetI64("shard_axis");
  if (!axis) return std::optional<WeightShard>();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("weight @", w.name(), ": ", why));
  };
  WeightShard s;
  s.axis = *axis;
  s.parts = a.I64Or("shard_parts", 0);
  s.segments = a.GetI64Array("shard_segments").value_or(std::vector<int64_t>{});
  if (s.axis < 0 || s.axis >= w.rank()) return bad(absl::StrCat("shard_axis ", s.axis, " is not an axis"));
  if (s.parts < 1) return bad("shard_parts must be positive");
  if (s.segments.empty()) return bad("shard_segments is missing");
  for (int64_t seg : s.segments)
    if (seg <= 0 || seg % s.parts != 0)
      return bad(absl::StrCat("segment ", seg, " does not split into ", s.parts, " parts"));
  const int64_t total = std::accumulate(s.segments.begin(), s.segments.end(), int64_t{0});
  const ir::Dim& local = w.shape()[s.axis];
  if (!local.IsConstant() || local.value() * s.parts != total)
    return bad(absl::StrCat("its axis ", s.axis, " holds ", local.ToString(), " of the segments [",
                            absl::StrJoin(s.segments, ", "), "] cut in ", s.parts));
  return std::optional<WeightShard>(std::move(s));
}

absl::StatusOr<TensorSlice> SliceTensor(const gguf::TensorInfo& t, const WeightShard& shard, int rank, int tp) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name, "\" ", gguf::ShapeString(t.ne), ": ", why));
  };
  if (tp < 1 || rank < 0 || rank >= tp) return bad(absl::StrCat("rank ", rank, " of ", tp));
  // The partition makes tp parts, or fewer replicated over the ranks (KV heads): never more.
  if (tp % shard.parts != 0)
    return bad(absl::StrCat(
        "cut into ", shard.parts, " parts, which do not map onto ", tp,
        tp == 1 ? " rank (the module's tp attribute is 1: a partitioned module needs its group)" : " ranks"));
  const int64_t rank_n = static_cast<int64_t>(t.ne.size());
  const std::vector<int64_t> shape = t.RowMajorShape();  // IR order
  if (shard.axis >= rank_n) return bad(absl::StrCat("no axis ", shard.axis));
  const int64_t total = std::accumulate(shard.segments.begin(), shard.segments.end(), int64_t{0});
  if (shape[shard.axis] != total)
    return bad(absl::StrCat("axis ", shard.axis, " has ", shape[shard.axis], ", the shard's segments sum to ", total));
  const formats::GgmlTypeTraits& tr = formats::TraitsOf(t.type);
  const int64_t part = shard.PartOf(rank, tp);
  const bool last = shard.axis == rank_n - 1;  // cutting inside rows (ne0)
  // Elements of the cut axis become [outer, axis, inner] blocks of bytes.
  int64_t outer = 1;
  for (int64_t d = 0; d < shard.axis; ++d) outer *= shape[d];
  uint64_t unit_bytes = 0;  // bytes of one step along the axis
  if (last) {
    for (int64_t seg : shard.segments)
      if ((seg / shard.parts) % tr.block_elems != 0)
        return bad(absl::StrCat("a part of ", seg / shard.parts, " elements of its rows is not whole ",
                                formats::GgmlTypeName(t.type), " blocks of ", tr.block_elems));
    unit_bytes = tr.block_bytes;  // counted in blocks below
  } else {
    MEMRA_ASSIGN_OR_RETURN(uint64_t row, formats::RowBytes(t.type, shape[rank_n - 1]));
    unit_bytes = row;
    for (int64_t d = shard.axis + 1; d < rank_n - 1; ++d) unit_bytes *= static_cast<uint64_t>(shape[d]);
  }
  const int64_t scale = last ? tr.block_elems : 1;  // elements per unit along the axis
  const uint64_t axis_bytes = static_cast<uint64_t>(total / scale) * unit_bytes;
  if (static_cast<uint64_t>(outer) * axis_bytes != t.nbytes || t.data.size() != t.nbytes)
    return bad("its bytes do not match its shape");
  TensorSlice out;
  out.ne = t.ne;
  out.ne[rank_n - 1 - shard.axis] = total / shard.parts;
  out.bytes.resize(static_cast<size_t>(t.nbytes / shard.parts));
  uint8_t* dst = out.bytes.data();
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* src = t.data.data() + o * axis_bytes;
    int64_t seg_start = 0;
    for (int64_t seg : shard.segments) {
      const int64_t len = seg / shard.parts;
      const uint64_t bytes = static_cast<uint64_t>(len / scale) * unit_bytes;
      std::memcpy(dst, src + static_cast<uint64_t>((seg_start + part * len) / scale) * unit_bytes, bytes);
      dst += bytes;
      seg_start += seg;
    }
  }
  return out;
}

}  // namespace memra::runtime
