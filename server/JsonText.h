// JSON text for what the server sends. Strings in a reply can hold bytes that are not UTF-8 (a
// client's request target echoed in an error, a token's piece that ends mid-character, a model
// file's name); nlohmann's plain dump() throws on them, which on a connection thread would end
// the process. Here each invalid byte becomes U+FFFD instead.
#pragma once

#include <algorithm>
#include <string>

#include "nlohmann/json.hpp"

namespace memra::server {

inline std::string JsonText(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The deepest nesting of arrays and objects in JSON text (brackets inside strings not counted).
// nlohmann's parser is iterative, but copying and dumping a value recurse once per level: a
// request body nested tens of thousands deep overflowed a connection thread's stack. Callers
// refuse text past kMaxJsonNesting before parsing it.
inline constexpr int kMaxJsonNesting = 128;
template <typename Text>  // std::string_view, absl::string_view, std::string
int JsonNesting(const Text& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace memra::server
