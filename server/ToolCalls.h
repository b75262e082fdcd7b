// Tool calls in a model's reply, turned into OpenAI `tool_calls`; the text outside the blocks
// stays content, and a block that does not parse stays text. Two block syntaxes:
//  * Qwen: `<tool_call>...</tool_call>` holding either the JSON form Qwen3's template asks for
//    ({"name": ..., "arguments": {...}}) or the XML form of Qwen3.5 / Qwen3-Coder
//    (<function=NAME><parameter=P>value</parameter>...</function>);
//  * Gemma 4: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, values in its template's
//    argument syntax (strings between <|"|> marks, numbers, true / false / null, {...} objects
//    whose keys may be bare or marked, [...] lists).
//
// ToolCallFilter does the same on a stream: text that is or may become a block is held back, and
// each block comes out as one call when it closes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace memra::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text (OpenAI's function.arguments)
};

struct AssistantReply {
  std::string content;
  std::vector<ToolCall> calls;
};

// The declared type of each tool's parameters (function.parameters.properties.P.type in the
// request's tools): an XML-form value of a "string" parameter stays text even when it reads as
// JSON ("123", "true"); other values that parse as JSON are that JSON.
using ToolParamTypes = std::map<std::string, std::map<std::string, std::string>>;
ToolParamTypes ParamTypesOf(const nlohmann::json& tools);

// A block is a call when it names a function (non-empty) and its arguments are a JSON object (the
// JSON form: an object, or a string holding one); anything else stays text.
AssistantReply ParseToolCalls(absl::string_view text, const ToolParamTypes* types = nullptr);

class ToolCallFilter {
 public:
  struct Out {
    std::string content;          // text to stream now
    std::vector<ToolCall> calls;  // blocks that closed
  };
  explicit ToolCallFilter(const ToolParamTypes* types = nullptr) : types_(types) {}
  Out Push(absl::string_view text);
  Out Flush();  // the end: an unclosed block comes out as text
  int calls_so_far() const { return calls_; }

 private:
  const ToolParamTypes* types_;  // may be null
  std::string held_;
  int calls_ = 0;
  bool after_call_ = false;  // trim the whitespace that follows a call
};

}  // namespace memra::server
