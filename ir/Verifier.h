// The verifier. Rules (each error names the function, the op with its location, and the rule):
//  - signature: operand count, operand roles (activation / weight / state and the state kind the
//    op expects), required attributes present with the schema's kind (ir/Ops.def);
//  - types: result count and types equal what ir/TypeInference.h infers for the op kind;
//  - SSA dominance: an operand is a weight, a state, an argument of the same function, or a
//    result of an op earlier in program order (segment bodies are transparent);
//  - structure: a function body ends with `return` whose operand types match the signature;
//    no `return` elsewhere; segments are not nested;
//  - state usage: a state is written by at most one op per function; an attention reads a KV
//    cache only after a kv_append of the same function wrote it; the position counter is not
//    read after advance_positions;
//  - declarations: weight and state shapes are static; quantized weights have rows that are a
//    multiple of the block size; state shapes match their kind (kv rank 3, conv rank 2, delta
//    rank 3, position i32[], rng i64[]).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "ir/Module.h"

namespace memra::ir {

struct VerifyOptions {
  std::string filename;  // prefixed to LINE:COL in messages when set
};

absl::Status VerifyModule(const Module& m, const VerifyOptions& options = {});
absl::Status VerifyFunction(const Function& f, const VerifyOptions& options = {});

}  // namespace memra::ir
