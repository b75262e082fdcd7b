// Tool calls in Qwen and Gemma 4 replies (server/ToolCalls.h): the block forms, text around them, blocks that
// do not parse staying text, and the streaming filter giving the same split however the text is
// cut into tokens (every cut point of the reply), holding back only what may become a block.
#include "server/ToolCalls.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace memra::server {
namespace {

using nlohmann::json;

TEST(ToolCallsTest, JsonAndXmlForms) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n<function=search>\n<parameter=query>\nbest cafés\n</parameter>\n"
      "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>";
  AssistantReply r = ParseToolCalls(text);
  EXPECT_EQ(r.content, "Let me check.\n");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Paris"}, {"days", 2}}));
  EXPECT_EQ(r.calls[1].name, "search");
  EXPECT_EQ(json::parse(r.calls[1].arguments), json({{"query", "best cafés"}, {"limit", 5}}));

  // Arguments given as a JSON string pass through; no arguments is {}.
  r = ParseToolCalls("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"a\":1}");
  r = ParseToolCalls("<tool_call>{\"name\": \"g\"}</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
}

TEST(ToolCallsTest, WhatDoesNotParseStaysText) {
  for (const char* text :
       {"no calls here", "<tool_call>{not json}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
        // arguments that are not an object (clients json.loads them into a dict), an empty name
        "<tool_call>{\"name\": \"f\", \"arguments\": \"not json\"}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": null}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": [1, 2]}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": \"[1]\"}</tool_call>", "<tool_call>{\"name\": \"\"}</tool_call>",
        "<tool_call><function=f><parameter=x>1</function></tool_call>",
        "an unclosed <tool_call>{\"name\":", "a < b and <tool_ca"}) {
    AssistantReply r = ParseToolCalls(text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

// An XML-form value of a parameter the tool declares a string stays its text ("123", "true"),
// streamed or whole; undeclared and non-string parameters are read as JSON.
TEST(ToolCallsTest, DeclaredStringParametersStayText) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"zip": {"type": "string"}, "flag": {"type": "string"}, "n": {"type": "integer"}}}}},
      {"name": "g", "parameters": {"properties": {"q": {"type": "string"}}}}])");
  const ToolParamTypes types = ParamTypesOf(tools);
  EXPECT_EQ(types.at("f").at("zip"), "string");
  EXPECT_EQ(types.at("g").at("q"), "string");
  const std::string text =
      "<tool_call>\n<function=f>\n<parameter=zip>\n02134\n</parameter>\n<parameter=flag>\ntrue\n</parameter>\n"
      "<parameter=n>\n7\n</parameter>\n<parameter=other>\n8\n</parameter>\n</function>\n</tool_call>";
  const json want = {{"zip", "02134"}, {"flag", "true"}, {"n", 7}, {"other", 8}};
  AssistantReply r = ParseToolCalls(text, &types);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(json::parse(r.calls[0].arguments), want);
  ToolCallFilter f(&types);
  std::vector<ToolCall> calls;
  for (char c : text)
    for (ToolCall& call : f.Push(std::string(1, c)).calls) calls.push_back(std::move(call));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(json::parse(calls[0].arguments), want);
  // Without the types, the old reading: JSON where it parses.
  r = ParseToolCalls(text);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(json::parse(r.calls[0].arguments)["flag"], json(true));
  EXPECT_TRUE(ParamTypesOf(json("not a list")).empty());
  EXPECT_TRUE(ParamTypesOf(json::parse(R"([1, {"function": 2}, {"name": "h", "parameters": []}])")).empty());
}

TEST(ToolCallsTest, StreamingSplitsLikeTheWhole) {
  const std::string text =
      "Sure <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"<tool\"}}\n</tool_call>\n"
      "<tool_call>\n<function=b>\n<parameter=y>\n[1, 2]\n</parameter>\n</function>\n</tool_call> done";
  const AssistantReply whole = ParseToolCalls(text);
  ASSERT_EQ(whole.calls.size(), 2u);
  EXPECT_EQ(whole.content, "Sure done");
  for (size_t step : {1, 2, 3, 5, 7, 64}) {
    ToolCallFilter f;
    std::string content;
    std::vector<ToolCall> calls;
    for (size_t i = 0; i < text.size(); i += step) {
      ToolCallFilter::Out o = f.Push(text.substr(i, step));
      content += o.content;
      for (auto& c : o.calls) calls.push_back(c);
      // Nothing of a block is ever streamed as content.
      EXPECT_EQ(content.find("<tool"), std::string::npos) << "step " << step << " at " << i;
    }
    content += f.Flush().content;
    EXPECT_EQ(content, whole.content) << "step " << step;
    ASSERT_EQ(calls.size(), 2u) << "step " << step;
    EXPECT_EQ(calls[0].arguments, whole.calls[0].arguments);
    EXPECT_EQ(calls[1].name, "b");
    EXPECT_EQ(f.calls_so_far(), 2);
  }
}

// Gemma 4's form, as its template writes a call back (format_argument with bare keys, strings
// between <|"|> marks), nested objects and lists, marked keys, scalars.
TEST(ToolCallsTest, Gemma4Form) {
  const std::string text =
      "Checking.<|tool_call>call:get_weather{city:<|\"|>Paris, France<|\"|>,days:2,metric:true,"
      "opts:{<|\"|>unit<|\"|>:<|\"|>C<|\"|>,hours:[6,12.5,null]},tags:[<|\"|>a}b<|\"|>]}<tool_call|>"
      "<|tool_call>call:noop{}<tool_call|>";
  AssistantReply r = ParseToolCalls(text);
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris, France", "days": 2, "metric": true,
                            "opts": {"unit": "C", "hours": [6, 12.5, null]}, "tags": ["a}b"]})"));
  EXPECT_EQ(r.calls[1].name, "noop");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  // Malformed Gemma blocks stay text; so does an unclosed one.
  for (const char* bad : {"<|tool_call>get_weather{}<tool_call|>", "<|tool_call>call:f{a:<|\"|>x}<tool_call|>",
                          "<|tool_call>call:f{a:1,}<tool_call|>", "<|tool_call>call:{a:1}<tool_call|>",
                          "<|tool_call>call:f{a:1} trailing<tool_call|>", "open <|tool_call>call:f{a:1}"}) {
    AssistantReply b = ParseToolCalls(bad);
    EXPECT_TRUE(b.calls.empty()) << bad;
    EXPECT_EQ(b.content, bad);
  }
  // Nesting is bounded: a hostile reply of 10,000 open lists parses to text, not a crash.
  const std::string deep = "<|tool_call>call:f{a:" + std::string(10000, '[') + "<tool_call|>";
  EXPECT_TRUE(ParseToolCalls(deep).calls.empty());
  // Streamed at every cut, the same split.
  const std::string both =
      "a <|tool_call>call:f{x:<|\"|><|tool<|\"|>}<tool_call|> b <tool_call>{\"name\": \"g\"}</tool_call>";
  const AssistantReply whole = ParseToolCalls(both);
  ASSERT_EQ(whole.calls.size(), 2u);
  EXPECT_EQ(json::parse(whole.calls[0].arguments), json({{"x", "<|tool"}}));
  for (size_t step : {1, 2, 3, 7}) {
    ToolCallFilter f;
    std::string content;
    int calls = 0;
    for (size_t i = 0; i < both.size(); i += step) {
      ToolCallFilter::Out o = f.Push(both.substr(i, step));
      content += o.content;
      calls += static_cast<int>(o.calls.size());
      EXPECT_EQ(content.find("tool_call"), std::string::npos) << "step " << step << " at " << i;
    }
    content += f.Flush().content;
    EXPECT_EQ(content, whole.content) << "step " << step;
    EXPECT_EQ(calls, 2) << "step " << step;
  }
}

}  // namespace
}  // namespace memra::server
