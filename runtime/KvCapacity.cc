#include "runtime/KvCapacity.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "ir/Value.h"

namespace memra::runtime {

int64_t KvContextCapacity(const ir::Module& module) {
  // The lowering's context bounds it too, so a module whose caches are all rings still has one.
  int64_t cap =
      module.attrs().I64Or("n_ctx", 0) > 0 ? module.attrs().I64Or("n_ctx", 0) : std::numeric_limits<int64_t>::max();
  for (const auto& s : module.states())
    if (s->state_kind() == ir::StateKind::kKv && !s->attrs().Has("ring") && s->shape().rank() == 3)
      cap = std::min(cap, s->shape()[0].value());
  return cap;
}

absl::Status CheckKvAppendFits(const ir::Op& op, int64_t position, int64_t rows) {
  const int64_t cap = op.operand(2)->shape()[0].value();
  if (const int64_t ring = op.attrs().I64Or("ring", 0); ring > 0) {
    if (rows > cap - ring + 1)
      return absl::OutOfRangeError(absl::StrCat("a call of ", rows, " tokens: the sliding-window ring @",
                                                op.operand(2)->name(), " of ", cap, " rows (window ", ring,
                                                ") takes at most ", cap - ring + 1, " rows per call"));
    return absl::OkStatus();
  }
  if (position + rows > cap)
    return absl::OutOfRangeError(absl::StrCat("context overflow: ", rows, " more tokens at position ", position,
                                              " exceed the context length of ", cap,
                                              " (the KV cache size; raise it with --ctx-size)"));
  return absl::OkStatus();
}

}  // namespace memra::runtime
