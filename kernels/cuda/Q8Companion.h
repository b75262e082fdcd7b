// The q8 companion of an activation (docs/design/q8-activations.md): a decode product reading x as
// int8 (GemvQuant.cu GQ_XQ = 1) needs x quantized first, by a launch of its own
// (gemv_q_quantize_x) on the critical path. When the unit producing x already holds each group of
// 32 consecutive values in one warp (a norm's row, fused_rows), it writes the quantized form too,
// right after x's f32 values in the same arena buffer, and the products read it there.
//
// The record, on the producing op (select-kernels writes it, plan-memory and the executors size
// the buffer by it, ir/ResultBuffer.h, the units read it):
//   q8_companion = i          result i carries a companion
//   q8_companion_at = off     its byte offset from the start of the result's buffer (256-aligned,
//                             past the f32 values)
//   q8_companion_bytes = n    its bytes: gemv_q_quantize_x's layout for the result's rows
// Producers mark their launch with the define MEMRA_Q8X_OFF = off (Common.cuh's q8x_store), so a
// selection that writes the companion is visible in its record.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Function.h"
#include "ir/Op.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/Target.h"

namespace memra::kernels::cuda {

struct Q8Companion {
  unsigned result = 0;
  int64_t rows = 0, cols = 0;  // the result as [rows, cols] (cols its last dim)
  int64_t elems = 0;           // rows * cols: the layout depends only on the flat index, so any
                               // view of the result with rows of a multiple of 32 reads it
  int64_t at = 0;              // byte offset from the result's buffer
  int64_t bytes = 0;
};

// The companion of a [rows, cols] f32 result: at the first 256-byte boundary past its values.
// nullopt when cols is not a multiple of 32 or there are no rows.
std::optional<Q8Companion> Q8CompanionLayout(unsigned result, int64_t rows, int64_t cols);

// The record on `producer` (nullopt: none, or malformed).
std::optional<Q8Companion> Q8CompanionOf(const ir::Op& producer);
// The companion carried by `v`: an op result whose producer records one for it, or a reshape
// (same buffer, same flat order) of one.
std::optional<Q8Companion> Q8CompanionOfValue(const ir::Value& v);
void WriteQ8Companion(const Q8Companion& c, ir::Op& producer);
void EraseQ8Companion(ir::Op& producer);
// Whether `op` carries any of the record's attributes (a malformed record too).
bool HasQ8CompanionRecord(const ir::Op& op);

// The defines a producer's launch adds to write `c` (MEMRA_Q8X_OFF, MEMRA_Q8X_ELEMS) and whether a
// launch carries them (the companion's offset).
void AddQ8CompanionDefines(const Q8Companion& c, Launch& l);
std::optional<int64_t> Q8CompanionDefine(const Launch& l);
// A producer's Bind: one of its launches writes the companion its op records, none when it
// records none, and the call's `elems` values fit it (errors name the op: a stale selection).
absl::Status CheckQ8CompanionBinding(const BindContext& c, int64_t elems);
// A consumer's Bind: the device address of operand i's companion (nullopt: it has none).
std::optional<uint64_t> Q8CompanionAddress(const BindContext& c, unsigned i);

// The number of gemv_q_quantize_x launches of a selection.
int CountQ8Launches(const OpSelection& s);

// Pairs producers with the products that read their result as q8 (select-kernels{q8-companions}):
// for each op whose result feeds (directly or through reshapes) a product that quantizes it (a
// gemv_q_quantize_x launch) and
// whose unit can write the companion, records it, re-selects the producer and its users at
// `shapes` (one per op of `ops`, in order; with select-kernels' `options`, SelectGpuOp's) and replaces their entries of
// `selections`. A pairing whose producer does not then write it, or that spares no launch, is undone. Returns the
// launches spared. `row_programs` false: fused_rows producers write none (select-kernels{
// q8-companion-rows=false}: Gemma 4's row programs, where the companions measured a loss).
absl::StatusOr<int64_t> PairQ8Companions(const std::vector<ir::Op*>& ops, const std::vector<OpShapes>& shapes,
                                         std::vector<OpSelection>& selections, const Target& target,
                                         const SelectOptions& options = {}, bool row_programs = true);

}  // namespace memra::kernels::cuda
