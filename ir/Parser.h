// Parser of the textual form (see ir/Printer.h for the syntax). Errors carry LINE:COL and say
// what was expected. The parser builds exactly what the text says (it coerces integer literals
// of f64 schema attributes to f64 but does not infer or check types): run the verifier after.
// Forward references to values inside a function are accepted (and resolved), so that the
// verifier can report dominance errors; a name never defined is a parse error.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Module.h"

namespace memra::ir {

struct ParseOptions {
  // Line number of the first line of `text` (for split input files) and the file name used in
  // messages ("" prints just LINE:COL).
  int first_line = 1;
  std::string filename;
};

absl::StatusOr<std::unique_ptr<Module>> ParseModule(absl::string_view text, const ParseOptions& options = {});

}  // namespace memra::ir
