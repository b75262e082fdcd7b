// Which ops a CUDA graph may capture (partition-segments). An op is capturable when replaying
// its recorded launches later computes the right thing: no host synchronization, no host-side
// decision on device data, shapes known when the graph is built, and no allocation (its results
// have fixed arena offsets). The per-kind part is the table in Capture.cc (a switch over every
// op kind, so a new kind must be classified); the per-op part checks static shapes and arena
// offsets. Reasons are short sentences recorded in the dump.
#pragma once

#include <string>

#include "ir/Op.h"

namespace memra::passes {

struct CaptureVerdict {
  bool capturable = true;
  // Why not (empty when capturable), e.g. "host sync: the results are copied to the host".
  std::string reason;
  // Capturable only per KV-length rung: the op's work depends on the live KV length, which the
  // kernels read from the device; the graph is sized for the rung's maximum.
  bool kv_rung = false;
};

// The verdict for `op` (not return/segment). `require_arena`: results without an `arena` offset
// are allocations.
CaptureVerdict ClassifyForCapture(const ir::Op& op, bool require_arena);

}  // namespace memra::passes
