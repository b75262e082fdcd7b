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

struct LayerContext {
  ir::OpBuilder& b;
  const ir::Module& m;
  int64_t layer;
  ir::Dim T;  // tokens of this call (dim 0 of every activation)

  std::string Tensor(absl::string_view tensor) const { return LayerTensorName(layer, tensor); }
  ir::Value* W(absl::string_view tensor) const;    // the weight blk.N.<tensor>
  ir::Value* S(absl::string_view state) const;     // the state blk.N.<state>
  std::string Node(absl::string_view node) const;  // "<node>-N"
};

}  // namespace memra::frontends
