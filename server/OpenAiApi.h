// The OpenAI HTTP API's requests and replies as memra sees them, without any HTTP: a JSON body
// becomes a scheduler Request (runtime/Scheduler.h) with what the reply needs to know, and the
// scheduler's token events become the reply: one JSON object, or server-sent-event chunks.
//
//   ApiContext ctx{&tokenizer, chat_template.get(), "qwen35-9b", ctx_per_slot};
//   auto job = ParseChatRequest(body, ctx);               // 400 on anything malformed
//   ReplyBuilder reply(*job, "chatcmpl-1", created);
//   for each TokenEvent e: write(reply.Chunk(e))            // stream
//   ... or reply.Add(e) for each, then reply.Json()         // one reply
//
// Fields memra takes (the rest of OpenAI's are accepted and ignored, as llama-server does):
// model, max_tokens / max_completion_tokens, temperature, top_p, top_k, min_p, seed, stop,
// presence_penalty, frequency_penalty, repeat_penalty, logprobs / top_logprobs (chat) or logprobs
// = n (completions), stream, stream_options.include_usage, n = 1; chat: messages (system, user,
// assistant, tool), tools, tool_choice "none" / "auto" (the model's <tool_call> blocks come back as
// tool_calls, finish_reason "tool_calls"; server/ToolCalls.h); completions: prompt as a string or
// token ids;
// llama-server's extensions top_k, min_p, repeat_penalty and ignore_eos.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/Scheduler.h"
#include "server/ToolCalls.h"

namespace memra::tokenizer {
class Tokenizer;
class ChatTemplate;
}  // namespace memra::tokenizer

namespace memra::server {

struct ApiContext {
  const tokenizer::Tokenizer* tokenizer = nullptr;
  const tokenizer::ChatTemplate* chat_template = nullptr;  // null: /v1/chat/completions refused
  std::string model;                                       // the id /v1/models lists
  int64_t ctx_per_slot = 0;                                // positions a request may hold
};

enum class ApiKind { kCompletion, kChat };

struct ApiJob {
  ApiKind kind = ApiKind::kCompletion;
  runtime::Request request;
  bool stream = false;
  bool include_usage = false;                        // stream_options.include_usage
  bool logprobs = false;                             // the reply carries logprobs (request.logprobs >= 0)
  bool tools = false;                                // chat with tools offered: <tool_call> blocks become tool_calls
  std::shared_ptr<const ToolParamTypes> tool_types;  // their parameters' declared types
  bool token_ids = false;  // return_token_ids (vLLM's extension): choices carry the generated ids
  std::string model;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // the logprobs' token texts
};

// 400-class errors are InvalidArgument (a field named), OutOfRange (a prompt over the context,
// with both numbers) or FailedPrecondition (a chat request on a model without a chat template).
absl::StatusOr<ApiJob> ParseCompletionRequest(absl::string_view body, const ApiContext& ctx);
absl::StatusOr<ApiJob> ParseChatRequest(absl::string_view body, const ApiContext& ctx);

// {"object": "list", "data": [{"id": model, "object": "model", ...}]}
std::string ModelsJson(const ApiContext& ctx, int64_t created);

// OpenAI's error object: {"error": {"message", "type", "code"}}; the HTTP status for a Status.
int HttpStatusOf(const absl::Status& s);
std::string ErrorJson(const absl::Status& s);
// The same with the HTTP status given (413 and others no Status code maps to).
std::string ErrorJson(const absl::Status& s, int http_status);

// The reply to one job, built from its token events in order.
class ReplyBuilder {
 public:
  ReplyBuilder(const ApiJob& job, std::string id, int64_t created);
  // Streaming: the SSE frames ("data: {...}\n\n") this event adds, one per token (its text may be
  // empty while a character or a possible stop string is held back; a chat reply's stopping
  // end-of-turn token gets none, unless token ids are asked for): the first event also opens the
  // assistant message (chat), the last one carries finish_reason, then the usage chunk when asked,
  // then "data: [DONE]". An event with an error gives an error frame instead.
  std::string Chunk(const runtime::TokenEvent& e);
  // Not streaming: takes the event; Json() is the whole reply once the last one came.
  void Add(const runtime::TokenEvent& e);
  std::string Json() const;
  bool done() const { return done_; }
  const absl::Status& error() const { return error_; }

 private:
  // The event of the stop id (an end-of-generation token) that ended the request.
  bool StoppedBy(const runtime::TokenEvent& e) const;
  const ApiJob& job_;
  std::string id_;
  int64_t created_;
  std::string text_;
  std::vector<int32_t> tokens_;
  std::vector<runtime::TokenEvent> logprob_events_;  // text-free copies, logprobs only
  ToolCallFilter tool_filter_;                       // streaming with tools
  runtime::FinishReason reason_ = runtime::FinishReason::kNone;
  runtime::Usage usage_;
  absl::Status error_;
  bool opened_ = false, done_ = false;
};

}  // namespace memra::server
