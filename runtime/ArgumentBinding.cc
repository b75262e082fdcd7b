#include "runtime/ArgumentBinding.h"

#include "absl/strings/str_cat.h"

namespace memra::runtime {

absl::StatusOr<ir::SymbolBindings> BindArguments(const ir::Function& fn, absl::Span<const HostTensor> args,
                                                 int64_t min_symbol_value) {
  const std::string name(fn.name());
  if (args.size() != fn.num_arguments())
    return absl::InvalidArgumentError(
        absl::StrCat("@", name, " takes ", fn.num_arguments(), " arguments, got ", args.size()));
  ir::SymbolBindings bindings;
  for (unsigned i = 0; i < fn.num_arguments(); ++i) {
    const ir::Value* a = fn.argument(i);
    const HostTensor& t = args[i];
    auto mismatch = [&] {
      return absl::InvalidArgumentError(
          absl::StrCat("@", name, ": argument ", i, " is ", t.ShapeString(), ", expected ", a->type().ToString()));
    };
    if (!t.valid() || t.dtype() != a->dtype() || t.rank() != a->rank()) return mismatch();
    for (int64_t d = 0; d < a->rank(); ++d) {
      const ir::Dim& dim = a->shape()[d];
      const int64_t v = t.dim(d);
      if (dim.IsConstant()) {
        if (dim.value() != v) return mismatch();
        continue;
      }
      const int64_t num = v - dim.offset();
      if (num % dim.coeff() != 0 || num / dim.coeff() < min_symbol_value)
        return absl::InvalidArgumentError(
            absl::StrCat("@", name, ": argument ", i, " dim ", d, " = ", v, " does not fit ", dim.ToString()));
      const int64_t val = num / dim.coeff();
      auto [it, inserted] = bindings.emplace(dim.symbol(), val);
      if (!inserted && it->second != val)
        return absl::InvalidArgumentError(
            absl::StrCat("@", name, ": symbol ", dim.symbol(), " bound to ", it->second, " and ", val));
    }
  }
  return bindings;
}

}  // namespace memra::runtime
