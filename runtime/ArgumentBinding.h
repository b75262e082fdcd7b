// Checks a function's arguments against its signature and binds its shape symbols (T, ...) from
// the argument shapes. Shared by the CPU and CUDA executors.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/Function.h"
#include "ir/Shape.h"
#include "runtime/cpu/HostTensor.h"

namespace memra::runtime {

// Errors name the function, the argument and the rule. A symbol must come out the same from every
// dimension it appears in, and at least `min_symbol_value` (the CUDA executor has no 0-token bucket).
absl::StatusOr<ir::SymbolBindings> BindArguments(const ir::Function& fn, absl::Span<const HostTensor> args,
                                                 int64_t min_symbol_value = 0);

}  // namespace memra::runtime
