#include "frontends/common/LayerContext.h"

#include "absl/strings/str_cat.h"

namespace memra::frontends {

std::string LayerTensorName(int64_t layer, absl::string_view tensor) {
  return absl::StrCat("blk.", layer, ".", tensor);
}

ir::Value* LayerContext::W(absl::string_view tensor) const { return m.weight(Tensor(tensor)); }
ir::Value* LayerContext::S(absl::string_view state) const { return m.state(Tensor(state)); }
std::string LayerContext::Node(absl::string_view node) const { return absl::StrCat(node, "-", layer); }

}  // namespace memra::frontends
