// How many positions a module's KV caches hold, and whether one call's rows fit: shared by the
// CPU and CUDA executors so both refuse the same calls with the same words. A sliding-window
// ring (state attribute "ring", ir/Ops.def kv_append ring) does not bound the context; it bounds
// the rows of one call.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ir/Module.h"
#include "ir/Op.h"

namespace memra::runtime {

// The context: the rows of the smallest KV cache that is not a ring, and at most the module's
// "n_ctx" (INT64_MAX when neither says).
int64_t KvContextCapacity(const ir::Module& module);

// A kv_append of `rows` rows at `position`: OutOfRange when it passes a full-length cache (context
// overflow) or appends more rows to a ring than its window leaves room for.
absl::Status CheckKvAppendFits(const ir::Op& kv_append, int64_t position, int64_t rows);

}  // namespace memra::runtime
