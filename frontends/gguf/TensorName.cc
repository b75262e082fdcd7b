#include "frontends/gguf/TensorName.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace memra::gguf {

std::optional<LayerTensorName> ParseLayerTensorName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "blk.")) return std::nullopt;
  const size_t dot = name.find('.');
  if (dot == 0 || dot == absl::string_view::npos) return std::nullopt;
  const absl::string_view digits = name.substr(0, dot);
  for (char c : digits)
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  int64_t layer = 0;
  if (!absl::SimpleAtoi(digits, &layer)) return std::nullopt;  // past int64
  return LayerTensorName{layer, name.substr(dot + 1)};
}

}  // namespace memra::gguf
