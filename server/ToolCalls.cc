#include "server/ToolCalls.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "server/JsonText.h"

namespace memra::server {
namespace {

using nlohmann::json;

// A block syntax: its markers and the parser of what is between them.
struct BlockSyntax {
  std::string_view open, close;
  std::optional<ToolCall> (*parse)(absl::string_view body, const ToolParamTypes* types);
};

// The declared type of `param` of tool `name` ("" when not declared).
std::string_view DeclaredType(const ToolParamTypes* types, const std::string& name, const std::string& param) {
  if (types == nullptr) return {};
  auto tool = types->find(name);
  if (tool == types->end()) return {};
  auto p = tool->second.find(param);
  return p == tool->second.end() ? std::string_view() : std::string_view(p->second);
}

// Gemma 4's argument syntax (its template's format_argument), read into JSON; advances `s` past
// the value. nullopt where it is not that syntax.
constexpr absl::string_view kGemmaQuote = "<|\"|>";
std::optional<json> GemmaValue(absl::string_view& s, int depth);

std::optional<std::string> GemmaKey(absl::string_view& s) {
  if (absl::ConsumePrefix(&s, kGemmaQuote)) {
    const size_t end = s.find(kGemmaQuote);
    if (end == absl::string_view::npos) return std::nullopt;
    std::string k(s.substr(0, end));
    s.remove_prefix(end + kGemmaQuote.size());
    return k;
  }
  const size_t end = s.find(':');
  if (end == absl::string_view::npos || end == 0) return std::nullopt;
  std::string k(absl::StripAsciiWhitespace(s.substr(0, end)));
  s.remove_prefix(end);
  return k;
}

// `{` key:value (, key:value)* `}` with `s` at the `{`.
std::optional<json> GemmaObject(absl::string_view& s, int depth) {
  if (!absl::ConsumePrefix(&s, "{")) return std::nullopt;
  json obj = json::object();
  if (absl::ConsumePrefix(&s, "}")) return obj;
  while (true) {
    std::optional<std::string> key = GemmaKey(s);
    if (!key || !absl::ConsumePrefix(&s, ":")) return std::nullopt;
    std::optional<json> v = GemmaValue(s, depth + 1);
    if (!v) return std::nullopt;
    obj[*key] = std::move(*v);
    if (absl::ConsumePrefix(&s, "}")) return obj;
    if (!absl::ConsumePrefix(&s, ",")) return std::nullopt;
  }
}

std::optional<json> GemmaValue(absl::string_view& s, int depth) {
  if (depth > 64) return std::nullopt;  // bounded nesting: hostile replies cannot recurse deep
  if (absl::ConsumePrefix(&s, kGemmaQuote)) {
    const size_t end = s.find(kGemmaQuote);
    if (end == absl::string_view::npos) return std::nullopt;
    json v = std::string(s.substr(0, end));
    s.remove_prefix(end + kGemmaQuote.size());
    return v;
  }
  if (!s.empty() && s.front() == '{') return GemmaObject(s, depth);
  if (absl::ConsumePrefix(&s, "[")) {
    json arr = json::array();
    if (absl::ConsumePrefix(&s, "]")) return arr;
    while (true) {
      std::optional<json> v = GemmaValue(s, depth + 1);
      if (!v) return std::nullopt;
      arr.push_back(std::move(*v));
      if (absl::ConsumePrefix(&s, "]")) return arr;
      if (!absl::ConsumePrefix(&s, ",")) return std::nullopt;
    }
  }
  // A bare scalar: up to the next , } or ]; JSON's number / true / false / null, else its text.
  const size_t end = s.find_first_of(",}]");
  if (end == 0 || end == absl::string_view::npos) return std::nullopt;
  const absl::string_view word = absl::StripAsciiWhitespace(s.substr(0, end));
  s.remove_prefix(end);
  json v = json::parse(word.begin(), word.end(), nullptr, false);
  if (v.is_discarded() || v.is_object() || v.is_array() || v.is_string()) return json(std::string(word));
  return v;
}

// `call:NAME{args}`.
std::optional<ToolCall> ParseGemmaBlock(absl::string_view body, const ToolParamTypes*) {
  body = absl::StripAsciiWhitespace(body);
  if (!absl::ConsumePrefix(&body, "call:")) return std::nullopt;
  const size_t brace = body.find('{');
  if (brace == absl::string_view::npos || brace == 0) return std::nullopt;
  ToolCall c;
  c.name = std::string(absl::StripAsciiWhitespace(body.substr(0, brace)));
  body.remove_prefix(brace);
  std::optional<json> args = GemmaObject(body, 0);
  if (!args || !absl::StripAsciiWhitespace(body).empty() || c.name.empty()) return std::nullopt;
  c.arguments = args->dump();
  return c;
}

// The call in one Qwen block's body, or nullopt when it is neither form.
std::optional<ToolCall> ParseQwenBlock(absl::string_view body, const ToolParamTypes* types) {
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
      // an object) is that JSON, anything else its text, and a parameter declared a string is
      // always its text.
      absl::string_view value = body.substr(name_end + 1, value_end - name_end - 1);
      absl::ConsumePrefix(&value, "\n");
      absl::ConsumeSuffix(&value, "\n");
      json v = DeclaredType(types, c.name, name) == "string" || JsonNesting(value) > kMaxJsonNesting
                   ? json(json::value_t::discarded)
                   : json::parse(value.begin(), value.end(), nullptr, false);
      args[name] = v.is_discarded() ? json(std::string(value)) : v;
      body.remove_prefix(value_end + std::string_view("</parameter>").size());
    }
    body = absl::StripAsciiWhitespace(body);
    if (body != "</function>" || c.name.empty()) return std::nullopt;
    c.arguments = JsonText(args);
    return c;
  }
  if (JsonNesting(body) > kMaxJsonNesting) return std::nullopt;  // text, not a call
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall c;
  c.name = j["name"].get<std::string>();
  if (c.name.empty()) return std::nullopt;
  // Arguments: an object, or a string holding one (clients json.loads them and expect a dict).
  json args = j.value("arguments", json::object());
  if (args.is_string()) {
    const std::string text = args.get<std::string>();
    if (JsonNesting(text) > kMaxJsonNesting) return std::nullopt;
    args = json::parse(text, nullptr, false);
  }
  if (args.is_discarded() || !args.is_object()) return std::nullopt;
  c.arguments = JsonText(args);
  return c;
}

constexpr BlockSyntax kSyntaxes[] = {{"<tool_call>", "</tool_call>", ParseQwenBlock},
                                     {"<|tool_call>", "<tool_call|>", ParseGemmaBlock}};

// Length of the longest suffix of `s` that is a proper prefix of an opening marker (text that may
// become one).
size_t PartialOpen(std::string_view s) {
  size_t best = 0;
  for (const BlockSyntax& b : kSyntaxes)
    for (size_t n = std::min(s.size(), b.open.size() - 1); n > best; --n)
      if (b.open.substr(0, n) == s.substr(s.size() - n)) {
        best = n;
        break;
      }
  return best;
}

// The first opening marker in `s`: its position and syntax (npos when none).
std::pair<size_t, const BlockSyntax*> FirstOpen(std::string_view s) {
  std::pair<size_t, const BlockSyntax*> first{std::string::npos, nullptr};
  for (const BlockSyntax& b : kSyntaxes) {
    const size_t at = s.find(b.open);
    if (at < first.first) first = {at, &b};
  }
  return first;
}

}  // namespace

ToolParamTypes ParamTypesOf(const json& tools) {
  ToolParamTypes types;
  if (!tools.is_array()) return types;
  for (const json& t : tools) {
    // {"type": "function", "function": {...}} or a bare function schema.
    const json* fn = t.is_object() && t.contains("function") ? &t["function"] : &t;
    if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) continue;
    auto params = fn->find("parameters");
    if (params == fn->end() || !params->is_object()) continue;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) continue;
    auto& out = types[(*fn)["name"].get<std::string>()];
    for (const auto& [p, schema] : props->items())
      if (schema.is_object() && schema.contains("type") && schema["type"].is_string())
        out[p] = schema["type"].get<std::string>();
  }
  return types;
}

AssistantReply ParseToolCalls(absl::string_view text, const ToolParamTypes* types) {
  ToolCallFilter f(types);
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
    const auto [open, syntax] = FirstOpen(held_);
    if (open == std::string::npos) {
      // No block starts: everything but a possible start of one goes out.
      const size_t keep = PartialOpen(held_);
      out.content += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.content += held_.substr(0, open);
    held_.erase(0, open);
    const size_t close = held_.find(syntax->close, syntax->open.size());
    if (close == std::string::npos) return out;  // inside a block: wait for its end
    const absl::string_view body = absl::string_view(held_).substr(syntax->open.size(), close - syntax->open.size());
    if (std::optional<ToolCall> c = syntax->parse(body, types_)) {
      out.calls.push_back(std::move(*c));
      ++calls_;
    } else {
      out.content += held_.substr(0, close + syntax->close.size());
    }
    held_.erase(0, close + syntax->close.size());
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
