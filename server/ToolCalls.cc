#include "server/ToolCalls.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace memra::server {
namespace {

using nlohmann::json;

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

// The call in one block's body, or nullopt when it is neither form.
std::optional<ToolCall> ParseBlock(absl::string_view body) {
  body = absl::StripAsciiWhitespace(body);
  if (absl::ConsumePrefix(&body, "<function=")) {
    const size_t end = body.find('>');
    if (end == absl::string_view::npos) return std::nullopt;
    ToolCall c;
    c.name = std::string(absl::StripAsciiWhitespace(body.substr(0, end)));
    body.remove_prefix(end + 1);
    json args = json::object();
    while (true) {
      body = absl::StripLeadingAsciiWhitespace(body);
      if (!absl::ConsumePrefix(&body, "<parameter=")) break;
      const size_t name_end = body.find('>');
      const size_t value_end = body.find("</parameter>");
      if (name_end == absl::string_view::npos || value_end == absl::string_view::npos || value_end < name_end)
        return std::nullopt;
      const std::string name(absl::StripAsciiWhitespace(body.substr(0, name_end)));
      // The template writes one newline around a value; a value that parses as JSON (a number,
      // an object) is that JSON, anything else its text.
      absl::string_view value = body.substr(name_end + 1, value_end - name_end - 1);
      absl::ConsumePrefix(&value, "\n");
      absl::ConsumeSuffix(&value, "\n");
      json v = json::parse(value.begin(), value.end(), nullptr, false);
      args[name] = v.is_discarded() ? json(std::string(value)) : v;
      body.remove_prefix(value_end + std::string_view("</parameter>").size());
    }
    body = absl::StripAsciiWhitespace(body);
    if (body != "</function>" || c.name.empty()) return std::nullopt;
    c.arguments = args.dump();
    return c;
  }
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall c;
  c.name = j["name"].get<std::string>();
  const json args = j.value("arguments", json::object());
  c.arguments = args.is_string() ? args.get<std::string>() : args.dump();
  return c;
}

// Length of the longest suffix of `s` that is a proper prefix of kOpen (text that may become one).
size_t PartialOpen(std::string_view s) {
  for (size_t n = std::min(s.size(), kOpen.size() - 1); n > 0; --n)
    if (kOpen.substr(0, n) == s.substr(s.size() - n)) return n;
  return 0;
}

}  // namespace

AssistantReply ParseToolCalls(absl::string_view text) {
  ToolCallFilter f;
  ToolCallFilter::Out a = f.Push(text), b = f.Flush();
  AssistantReply r;
  r.content = a.content + b.content;
  r.calls = std::move(a.calls);
  for (auto& c : b.calls) r.calls.push_back(std::move(c));
  return r;
}

ToolCallFilter::Out ToolCallFilter::Push(absl::string_view text) {
  held_.append(text.data(), text.size());
  Out out;
  // Whitespace after a call (between calls, or after the last) is the template's, not content.
  if (after_call_) {
    const size_t n = held_.find_first_not_of(" \t\r\n");
    held_.erase(0, n == std::string::npos ? held_.size() : n);
    if (held_.empty()) return out;
    after_call_ = false;
  }
  while (true) {
    const size_t open = held_.find(kOpen);
    if (open == std::string::npos) {
      // No block starts: everything but a possible start of one goes out.
      const size_t keep = PartialOpen(held_);
      out.content += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.content += held_.substr(0, open);
    held_.erase(0, open);
    const size_t close = held_.find(kClose);
    if (close == std::string::npos) return out;  // inside a block: wait for its end
    const absl::string_view body = absl::string_view(held_).substr(kOpen.size(), close - kOpen.size());
    if (std::optional<ToolCall> c = ParseBlock(body)) {
      out.calls.push_back(std::move(*c));
      ++calls_;
    } else {
      out.content += held_.substr(0, close + kClose.size());
    }
    held_.erase(0, close + kClose.size());
    if (calls_ > 0) {
      const size_t n = held_.find_first_not_of(" \t\r\n");
      held_.erase(0, n == std::string::npos ? held_.size() : n);
      after_call_ = held_.empty();
    }
  }
}

ToolCallFilter::Out ToolCallFilter::Flush() {
  Out out;
  out.content = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace memra::server
