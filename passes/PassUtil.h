// Small helpers shared by the transformation passes: program-order indices, single-use checks,
// replacing op results (names travel with the values), and the ':'-separated list options that
// pipeline strings allow (a pipeline option value cannot hold ',' or ' ').
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Function.h"

namespace memra::passes {

// Program-order index of every op of `f` (segment bodies included, a segment before its body).
absl::flat_hash_map<const ir::Op*, int64_t> ProgramOrder(const ir::Function& f);

// `v` is an op result used by exactly one operand of one op.
bool HasSingleUse(const ir::Value* v);

// `v`'s defining op if it is of `kind`, else nullptr.
ir::Op* DefOf(const ir::Value* v, ir::OpKind kind);

// Every use of `from` now uses `to`; `to` takes `from`'s name when `from` has one.
void ReplaceValue(ir::Value* from, ir::Value* to);

// The attributes `names` that `from` holds, set in `to` as they are (absent ones stay absent): what
// a fusion carries over from the ops it replaces.
void CopyAttrs(const ir::AttrDict& from, ir::AttrDict& to, std::initializer_list<absl::string_view> names);

// Parses "16..4096" (powers of two from 16 to 4096) or "16:32:48" / "16,32,48" into a sorted,
// deduplicated list of positive integers.
// Buckets of at most kMaxBucket tokens (a call's rows; larger ones would only overflow sizes).
inline constexpr int64_t kMaxBucket = int64_t{1} << 24;
absl::StatusOr<std::vector<int64_t>> ParseLadder(absl::string_view text);
// Splits "a:b:c" (or "a,b,c") into its non-empty parts.
std::vector<std::string> SplitListOption(absl::string_view text);

}  // namespace memra::passes
