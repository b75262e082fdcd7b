// What a layer builder of frontends/common needs: the op builder, the module (weights and states
// by name), the layer index and the call's token count. It also spells the two naming schemes a
// layer uses: GGUF tensors `blk.N.<tensor>` and llama.cpp's node names `<node>-N` (executor
// traces line up with llama.cpp's per-node dumps by these names).
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "ir/Builder.h"
#include "ir/Module.h"
#include "ir/Shape.h"

namespace memra::frontends {

// "blk.N.<tensor>": the GGUF name of a layer tensor (and of a layer state).
std::string LayerTensorName(int64_t layer, absl::string_view tensor);

// The batch operands of a step over several sequences (ir/Ops.def, "sequences").
struct SeqBatch {
  ir::Value* seq_slot = nullptr;   // i32[S]: the step's argument
  ir::Value* seq_start = nullptr;  // i32[S+1]: the step's argument
  ir::Value* slot = nullptr;       // i32[T]: seq_positions' slot per row
  ir::Value* blocks = nullptr;     // @kv_blocks : i32[S, MB]
};

struct LayerContext {
  ir::OpBuilder& b;
  const ir::Module& m;
  int64_t layer;
  ir::Dim T;                      // tokens of this call (dim 0 of every activation)
  const SeqBatch* seq = nullptr;  // set in a step over several sequences

  std::string Tensor(absl::string_view tensor) const { return LayerTensorName(layer, tensor); }
  ir::Value* W(absl::string_view tensor) const;    // the weight blk.N.<tensor>
  ir::Value* S(absl::string_view state) const;     // the state blk.N.<state>
  std::string Node(absl::string_view node) const;  // "<node>-N"
};

}  // namespace memra::frontends
