// JSON text for what the server sends. Strings in a reply can hold bytes that are not UTF-8 (a
// client's request target echoed in an error, a token's piece that ends mid-character, a model
// file's name); nlohmann's plain dump() throws on them, which on a connection thread would end
// the process. Here each invalid byte becomes U+FFFD instead.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace memra::server {

inline std::string JsonText(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace memra::server
