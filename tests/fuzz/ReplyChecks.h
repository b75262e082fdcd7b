// What the server fuzzers check of a reply's text: JSON, and server-sent-event frames of JSON.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace memra::fuzz {

inline bool IsJson(const std::string& s) { return !nlohmann::json::parse(s, nullptr, false).is_discarded(); }

// Every "data: ..." frame of an event stream is JSON or [DONE].
inline bool FramesAreJson(const std::string& body) {
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) return false;
    const std::string payload = body.substr(at + 6, end - at - 6);
    if (payload != "[DONE]" && !IsJson(payload)) return false;
    at = end + 2;
  }
  return true;
}

}  // namespace memra::fuzz
