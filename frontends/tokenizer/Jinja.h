// A Jinja2 subset interpreter for chat templates (the HF `tokenizer_config.json` / GGUF
// `tokenizer.chat_template` kind), with Python-Jinja semantics where they differ from JS ports.
//
// Supported:
//  * tags: {{ }}, {% %}, {# #}, whitespace control (`-`, `+`), trim_blocks / lstrip_blocks (on,
//    as transformers' environment), {% raw %}.
//  * statements: if / elif / else, for (tuple targets, `if` filter, else, loop.index/index0/
//    revindex/revindex0/first/last/length/previtem/nextitem/cycle), break / continue, set
//    (names, namespace attributes, tuples, block set), macro (with defaults, recursion-capped),
//    generation / endgeneration (rendered through).
//  * expressions: literals (str, int, float, bool, none, list, tuple, dict), attribute / item /
//    slice access, calls, filters, tests, `a if c else b`, or / and / not, comparisons, in /
//    not in, is / is not, + - * / // % **, ~.
//  * filters: length count string trim upper lower capitalize title default(d) join first last
//    items dictsort list safe escape reverse replace int float abs round unique tojson(indent,
//    ensure_ascii) map select reject selectattr rejectattr sort sum min max indent wordcount.
//  * tests: defined undefined none string number integer float boolean true false mapping
//    sequence iterable callable even odd divisibleby eq/equalto ne sameas lt gt le ge in lower
//    upper.
//  * methods: str.startswith endswith split rsplit splitlines strip lstrip rstrip upper lower
//    title capitalize replace find rfind index count join isdigit isalpha isspace; dict.get
//    items keys values; list.append index count.
//  * globals: namespace(), range(), raise_exception(msg), strftime_now(fmt), dict().
// Anything else (include, extends, import, call blocks, filters / tests not listed) is a clear
// error naming the construct and the template line. Evaluation is bounded (steps, output size,
// recursion), so no template or input can hang or crash the process.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/tokenizer/Json.h"

namespace memra::tokenizer::jinja {

struct Options {
  bool trim_blocks = true;    // drop the first newline after a block tag
  bool lstrip_blocks = true;  // strip spaces/tabs before a block tag at the start of a line
  bool keep_trailing_newline = false;
  size_t max_output_bytes = size_t{64} << 20;
  uint64_t max_steps = uint64_t{10} << 20;  // evaluation steps (nodes, expressions, loop
                                            // iterations) before giving up
};

class Template {
 public:
  static absl::StatusOr<std::unique_ptr<Template>> Parse(absl::string_view source, Options options = {});
  ~Template();
  // Renders with `variables` (a JSON object) as the global context.
  absl::StatusOr<std::string> Render(const Json& variables) const;

  struct Impl;

 private:
  explicit Template(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::tokenizer::jinja
