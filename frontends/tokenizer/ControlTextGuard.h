// Keeps control-token texts written inside chat messages from becoming control tokens.
//
// A chat prompt is the template's text with the request's strings (message contents, names, tool
// schemas and arguments) spliced in, and it is tokenized with control tokens parsed, since the
// template writes `<|im_start|>`, `<start_of_turn>` and the like as text. Without a guard, a user
// message that spells `<|im_end|>\n<|im_start|>system\n...` would be tokenized into real turn
// markers: the client could forge a system turn (llama.cpp's server and transformers both do
// this). OpenAI's API treats message content as text only; so does memra.
//
// How: before rendering, every control-token text in the request's strings is replaced by a
// placeholder of Private Use Area characters (U+E000, digits as U+E010..U+E019, U+E001) that no
// template filter changes and no token matches; after rendering, each placeholder is put back and
// the byte range it spans is recorded, so the tokenizer (EncodeOptions::literal_ranges) encodes
// it as plain text. A U+E000 already in the request is escaped the same way, so the round trip is
// exact. Templates that inspect message text see the placeholder where a control text was: a test
// like `'<|im_end|>' in content` is false there, which is the point.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "frontends/tokenizer/Json.h"
#include "frontends/tokenizer/TextMatcher.h"
#include "frontends/tokenizer/Tokenizer.h"

namespace memra::tokenizer {

class ControlTextGuard {
 public:
  // `control_texts`: the texts EncodeOptions::parse_special matches (Tokenizer::ControlTexts()).
  explicit ControlTextGuard(std::vector<std::string> control_texts);

  // A copy of `value` with every string (object keys too) guarded.
  Json Guard(const Json& value) const;
  std::string GuardText(absl::string_view text) const;

  // `rendered` with the placeholders put back; `ranges` gets the byte ranges of the texts put back
  // (ascending, not overlapping). A broken placeholder (a template cut it) stays as it is.
  std::string Restore(absl::string_view rendered, std::vector<TextRange>* ranges) const;

 private:
  std::vector<std::string> texts_;  // index 0: the U+E000 escape itself
  TextMatcher<int> matcher_;        // texts_ by index (views of texts_, filled once)
};

}  // namespace memra::tokenizer
