// GGUF tensor names of a layer: `blk.<N>.<rest>` (llama.cpp's naming, e.g. blk.3.ffn_down.weight).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace memra::gguf {

struct LayerTensorName {
  int64_t layer;           // N
  absl::string_view rest;  // what follows `blk.N.` (a view into the name)
};

// The layer and the rest of `blk.<N>.<rest>`; nullopt for a name of no layer (`output.weight`) or
// whose N is not a non-negative decimal number.
std::optional<LayerTensorName> ParseLayerTensorName(absl::string_view name);

}  // namespace memra::gguf
