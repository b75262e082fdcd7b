#include "server/OpenAiApi.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Json.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "ir/StatusMacros.h"
#include "nlohmann/json.hpp"
#include "server/JsonText.h"

namespace memra::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxModelName = 256;
constexpr size_t kMaxLogitBias = 1024;

// A seed for a request that names none: the process's random start plus a counter, mixed
// (splitmix64), so concurrent requests differ and no two processes repeat each other.
uint64_t UnseededSeed() {
  static const uint64_t start = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> count{0};
  uint64_t z = start + 0x9e3779b97f4a7c15ull * (count.fetch_add(1) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("'", field, "': ", what));
}

absl::StatusOr<json> ParseBody(absl::string_view body) {
  if (const int depth = JsonNesting(body); depth > kMaxJsonNesting)
    return absl::InvalidArgumentError(absl::StrCat("the request body nests arrays and objects ", depth,
                                                   " deep; at most ", kMaxJsonNesting, " are accepted"));
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the request body is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("the request body must be a JSON object");
  return j;
}

// A number field within [lo, hi], or `def` when absent or null.
absl::StatusOr<double> Number(const json& j, const char* field, double def, double lo, double hi) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number()) return Bad(field, "must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    return Bad(field, absl::StrCat("must be in [", lo, ", ", hi, "] (got ", v, ")"));
  return v;
}

absl::StatusOr<int64_t> Integer(const json& j, const char* field, int64_t def, int64_t lo, int64_t hi) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number_integer()) return Bad(field, "must be an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return Bad(field, absl::StrCat("must be in [", lo, ", ", hi, "] (got ", it->get<uint64_t>(), ")"));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Bad(field, absl::StrCat("must be in [", lo, ", ", hi, "] (got ", v, ")"));
  return v;
}

absl::StatusOr<bool> Bool(const json& j, const char* field, bool def) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) return Bad(field, "must be true or false");
  return it->get<bool>();
}

// out = *v (converted), or v's error.
template <typename T, typename U>
absl::Status Take(U& out, absl::StatusOr<T> v) {
  if (!v.ok()) return v.status();
  out = static_cast<U>(*v);
  return absl::OkStatus();
}

// The fields both endpoints share: sampling, limits, stop, stream.
absl::Status ParseCommon(const json& j, const ApiContext& ctx, ApiJob& job) {
  runtime::Request& r = job.request;
  job.model = ctx.model;
  job.tokenizer = ctx.tokenizer;
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("model", "must be a string");
    job.model = it->get<std::string>();
    // (the reply echoes it: a name of megabytes would make every reply that large)
    if (job.model.size() > kMaxModelName) return Bad("model", absl::StrCat("at most ", kMaxModelName, " bytes"));
  }
  if (auto n = Integer(j, "n", 1, 1, 1); !n.ok()) return Bad("n", "only 1 choice per request is supported");
  if (auto b = Integer(j, "best_of", 1, 1, 1); !b.ok()) return Bad("best_of", "only 1 is supported");
  // Fields memra does not implement are refused when they would change the reply, not ignored.
  if (auto it = j.find("echo"); it != j.end() && !it->is_null() && *it != json(false))
    return Bad("echo", "only false is supported (the reply never repeats the prompt)");
  if (auto it = j.find("suffix"); it != j.end() && !it->is_null() && *it != json(""))
    return Bad("suffix", "insertion (a text after the completion) is not supported");
  // JSON mode and schemas need constrained decoding, which memra does not do: refused rather than
  // ignored (a client would otherwise take free text for JSON).
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
    const auto type = it->is_object() ? it->find("type") : it->end();
    if (type == it->end() || !type->is_string() || *type != "text")
      return Bad("response_format", "only {\"type\": \"text\"} is supported (no constrained decoding)");
  }
  // OpenAI's defaults: temperature 1, top_p 1 (llama-server's own defaults differ; a client of
  // this API expects OpenAI's).
  MEMRA_RETURN_IF_ERROR(Take(r.sampling.temperature, Number(j, "temperature", 1.0, 0.0, 100.0)));
  MEMRA_RETURN_IF_ERROR(Take(r.sampling.top_p, Number(j, "top_p", 1.0, 0.0, 1.0)));
  MEMRA_RETURN_IF_ERROR(Take(r.sampling.top_k, Integer(j, "top_k", 0, 0, std::numeric_limits<int32_t>::max())));
  MEMRA_RETURN_IF_ERROR(Take(r.sampling.min_p, Number(j, "min_p", 0.0, 0.0, 1.0)));
  MEMRA_RETURN_IF_ERROR(Take(r.sampling.presence_penalty, Number(j, "presence_penalty", 0.0, -2.0, 2.0)));
  MEMRA_RETURN_IF_ERROR(Take(r.sampling.frequency_penalty, Number(j, "frequency_penalty", 0.0, -2.0, 2.0)));
  MEMRA_RETURN_IF_ERROR(Take(r.sampling.repeat_penalty, Number(j, "repeat_penalty", 1.0, 1e-3, 100.0)));
  // No seed: a fresh one per request, as OpenAI's API and llama-server do (a fixed default made
  // every unseeded sampled request with the same prompt give the same text). A given seed gives
  // the same tokens every time, alone or among other requests.
  if (auto it = j.find("seed"); it == j.end() || it->is_null())
    r.seed = UnseededSeed();
  else
    MEMRA_RETURN_IF_ERROR(
        Take(r.seed, Integer(j, "seed", 0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())));
  // max_tokens absent: up to the context (the scheduler clamps to what the slot holds).
  int64_t max_tokens = ctx.ctx_per_slot;
  MEMRA_RETURN_IF_ERROR(Take(max_tokens, Integer(j, "max_tokens", max_tokens, 1, std::numeric_limits<int32_t>::max())));
  MEMRA_RETURN_IF_ERROR(
      Take(max_tokens, Integer(j, "max_completion_tokens", max_tokens, 1, std::numeric_limits<int32_t>::max())));
  r.max_tokens = max_tokens;
  // logit_bias: {"token id": bias in [-100, 100]}, added to the logits before sampling.
  if (auto it = j.find("logit_bias"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("logit_bias", "must be an object of token id: bias");
    if (it->size() > kMaxLogitBias) return Bad("logit_bias", absl::StrCat("at most ", kMaxLogitBias, " tokens"));
    const int64_t vocab = ctx.tokenizer->n_vocab();
    for (const auto& [key, value] : it->items()) {
      int64_t id = -1;
      if (key.empty() || key.size() > 10 || key.find_first_not_of("0123456789") != std::string::npos ||
          (id = std::stoll(key)) >= vocab)
        return Bad("logit_bias", absl::StrCat("key '", key.substr(0, 16), "' is not a token id in [0, ", vocab, ")"));
      if (!value.is_number() || !std::isfinite(value.get<double>()) || std::fabs(value.get<double>()) > 100.0)
        return Bad("logit_bias", absl::StrCat("the bias of token ", id, " must be a number in [-100, 100]"));
      r.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      r.stop_strings.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) return Bad("stop", "must be a string or a list of strings");
        r.stop_strings.push_back(s.get<std::string>());
      }
      if (r.stop_strings.size() > 16) return Bad("stop", "at most 16 stop strings");
    } else {
      return Bad("stop", "must be a string or a list of strings");
    }
    for (const auto& s : r.stop_strings)
      if (s.empty()) return Bad("stop", "a stop string must not be empty");
  }
  // ignore_eos (llama-server's extension): generate through end-of-generation tokens (benchmarks).
  bool ignore_eos = false;
  MEMRA_RETURN_IF_ERROR(Take(ignore_eos, Bool(j, "ignore_eos", false)));
  if (!ignore_eos) r.stop_ids = ctx.tokenizer->eog_ids();
  // cache_prompt (llama-server's extension): false skips the prefix cache (same output, more time).
  MEMRA_RETURN_IF_ERROR(Take(r.cache_prompt, Bool(j, "cache_prompt", true)));
  // return_token_ids (vLLM's extension): the generated ids beside the text (multi-turn clients
  // that keep token histories, bench/serve_bench.py's sessions).
  MEMRA_RETURN_IF_ERROR(Take(job.token_ids, Bool(j, "return_token_ids", false)));
  MEMRA_RETURN_IF_ERROR(Take(job.stream, Bool(j, "stream", false)));
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!job.stream) return Bad("stream_options", "only allowed with 'stream': true");
    if (!it->is_object()) return Bad("stream_options", "must be an object");
    MEMRA_RETURN_IF_ERROR(Take(job.include_usage, Bool(*it, "include_usage", false)));
  }
  return absl::OkStatus();
}

absl::Status CheckPrompt(const std::vector<int32_t>& ids, const ApiContext& ctx) {
  if (ids.empty()) return absl::InvalidArgumentError("the prompt is empty");
  if (static_cast<int64_t>(ids.size()) >= ctx.ctx_per_slot)
    return absl::OutOfRangeError(absl::StrCat("the prompt has ", ids.size(), " tokens; the context holds ",
                                              ctx.ctx_per_slot, " per request (prompt + generated)"));
  return absl::OkStatus();
}

std::string FinishName(runtime::FinishReason r) {
  // OpenAI has no "cancelled": a cancelled stream ends with what it had (length is the nearest).
  if (r == runtime::FinishReason::kCancelled) return "length";
  return std::string(runtime::FinishReasonName(r));
}

json UsageJson(const runtime::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

std::string Piece(const tokenizer::Tokenizer* tok, int32_t id) {
  return tok != nullptr ? tok->TokenToPiece(id, /*render_special=*/true) : std::string();
}

}  // namespace

absl::StatusOr<ApiJob> ParseCompletionRequest(absl::string_view body, const ApiContext& ctx) {
  auto parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  ApiJob job;
  job.kind = ApiKind::kCompletion;
  if (absl::Status st = ParseCommon(j, ctx, job); !st.ok()) return st;
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return Bad("prompt", "is required");
  std::vector<int32_t>& ids = job.request.prompt;
  const int64_t vocab = ctx.tokenizer->n_vocab();
  if (it->is_string()) {
    ids = ctx.tokenizer->Encode(it->get<std::string>());
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    ids = ctx.tokenizer->Encode((*it)[0].get<std::string>());
  } else if (it->is_array()) {
    // A list the context cannot hold is refused before its ids are read (CheckPrompt's message).
    if (static_cast<int64_t>(it->size()) >= ctx.ctx_per_slot)
      return absl::OutOfRangeError(absl::StrCat("the prompt has ", it->size(), " tokens; the context holds ",
                                                ctx.ctx_per_slot, " per request (prompt + generated)"));
    ids.reserve(it->size());
    for (const auto& t : *it) {
      if (!t.is_number_integer()) return Bad("prompt", "must be a string or a list of token ids");
      // Past 2^63 the JSON holds an unsigned number: named as written, not wrapped negative.
      if (t.is_number_unsigned() && t.get<uint64_t>() >= static_cast<uint64_t>(vocab))
        return Bad("prompt", absl::StrCat("token id ", t.get<uint64_t>(), " is outside [0, ", vocab, ")"));
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= vocab) return Bad("prompt", absl::StrCat("token id ", id, " is outside [0, ", vocab, ")"));
      ids.push_back(static_cast<int32_t>(id));
    }
  } else {
    return Bad("prompt", "must be a string or a list of token ids");
  }
  if (absl::Status st = CheckPrompt(ids, ctx); !st.ok()) return st;
  int64_t n = -1;
  MEMRA_RETURN_IF_ERROR(Take(n, Integer(j, "logprobs", -1, 0, 20)));
  job.request.logprobs = static_cast<int>(n);
  job.logprobs = n >= 0;
  return job;
}

absl::StatusOr<ApiJob> ParseChatRequest(absl::string_view body, const ApiContext& ctx) {
  auto parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (ctx.chat_template == nullptr)
    return absl::FailedPreconditionError("the model has no chat template: use /v1/completions");
  ApiJob job;
  job.kind = ApiKind::kChat;
  if (absl::Status st = ParseCommon(j, ctx, job); !st.ok()) return st;
  job.request.conversation = true;  // a later turn resends these messages
  auto it = j.find("messages");
  if (it == j.end() || !it->is_array() || it->empty()) return Bad("messages", "must be a non-empty list");
  for (size_t m = 0; m < it->size(); ++m) {
    const json& msg = (*it)[m];
    const std::string where = absl::StrCat("messages[", m, "]");
    if (!msg.is_object()) return Bad(where, "must be an object");
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) return Bad(where + ".role", "is required (a string)");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer")
      return Bad(where + ".role", absl::StrCat("unknown role '", r.substr(0, 32), r.size() > 32 ? "...'" : "'"));
    auto content = msg.find("content");
    if (content != msg.end() && !content->is_null() && !content->is_string() && !content->is_array())
      return Bad(where + ".content", "must be a string or a list of parts");
    // (a template loops over tool_calls: a string would render a call per character)
    if (auto calls = msg.find("tool_calls"); calls != msg.end() && !calls->is_null()) {
      if (!calls->is_array()) return Bad(where + ".tool_calls", "must be a list");
      for (const json& call : *calls) {
        const auto fn = call.is_object() ? call.find("function") : call.end();
        const bool named = fn != call.end() && fn->is_object() && fn->contains("name") && (*fn)["name"].is_string() &&
                           !(*fn)["name"].get<std::string>().empty();
        const auto args = named ? fn->find("arguments") : call.end();
        if (!named || (args != fn->end() && !args->is_string() && !args->is_object()))
          return Bad(where + ".tool_calls",
                     "each call must be {\"function\": {\"name\": a non-empty string, \"arguments\": a string or "
                     "an object}}");
      }
    }
  }
  // OpenAI's "developer" role is its "system" role renamed: a template that does not know the name
  // (Qwen's drop such messages silently) gets "system".
  const bool template_knows_developer = absl::StrContains(ctx.chat_template->source(), "developer");
  tokenizer::ChatInputs in;
  // Content given as a list of text parts becomes one string (what templates expect).
  json messages = *it;
  for (auto& msg : messages) {
    if (!template_knows_developer && msg["role"] == "developer") msg["role"] = "system";
    auto c = msg.find("content");
    // An assistant turn that only calls tools has content null: templates concatenate it.
    if (c == msg.end() || c->is_null()) {
      msg["content"] = "";
      continue;
    }
    if (!c->is_array()) continue;
    std::string text;
    for (const auto& part : *c) {
      // (a part's "type" checked as a string before it is compared: json::value throws otherwise)
      const auto type = part.is_object() ? part.find("type") : part.end();
      if (type == part.end() || !type->is_string() || *type != "text" || !part.contains("text") ||
          !part["text"].is_string())
        return Bad("messages[].content", "only text parts are supported");
      text += part["text"].get<std::string>();
    }
    *c = text;
  }
  auto to_json = [](const json& v) { return tokenizer::Json::Parse(JsonText(v)); };
  // (the body's nesting is bounded above, so what the template engine's parser refuses is the
  // request's content)
  auto msgs = to_json(messages);
  if (!msgs.ok()) return Bad("messages", msgs.status().message());
  in.messages = std::move(*msgs);
  // "required" and a named function would need constrained decoding, which memra does not do:
  // refused rather than treated as "auto", with or without tools.
  const json choice = j.value("tool_choice", json("auto"));
  if (choice != json("auto") && choice != json("none") && !choice.is_null())
    return Bad("tool_choice", "only \"auto\" and \"none\" are supported");
  if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
    if (!t->is_array()) return Bad("tools", "must be a list");
    if (!t->empty()) {
      // "none": the model still sees the tools (OpenAI's meaning), but its reply is not read for
      // calls.
      auto tools = to_json(*t);
      if (!tools.ok()) return Bad("tools", tools.status().message());
      in.tools = std::move(*tools);
      job.tools = choice != json("none");
      job.tool_types = std::make_shared<const ToolParamTypes>(ParamTypesOf(*t));
    }
  }
  auto prompt = ctx.chat_template->Render(in);
  if (!prompt.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("the chat template failed on these messages: ", prompt.status().message()));
  // The template's control tokens are parsed; the messages' own control texts stay text.
  job.request.prompt = ctx.tokenizer->Encode(prompt->text, prompt->EncodeOptions());
  if (absl::Status st = CheckPrompt(job.request.prompt, ctx); !st.ok()) return st;
  bool logprobs = false;
  MEMRA_RETURN_IF_ERROR(Take(logprobs, Bool(j, "logprobs", false)));
  int64_t top = 0;
  MEMRA_RETURN_IF_ERROR(Take(top, Integer(j, "top_logprobs", 0, 0, 20)));
  if (top > 0 && !logprobs) return Bad("top_logprobs", "needs 'logprobs': true");
  job.logprobs = logprobs;
  job.request.logprobs = logprobs ? static_cast<int>(top) : -1;
  return job;
}

std::string ModelsJson(const ApiContext& ctx, int64_t created) {
  json m = {{"id", ctx.model}, {"object", "model"}, {"created", created}, {"owned_by", "memra"}};
  return JsonText(json{{"object", "list"}, {"data", json::array({m})}});
}

int HttpStatusOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:       // shutting down
    case absl::StatusCode::kDeadlineExceeded:  // past --request-time-limit (queued or running)
      return 503;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& s) { return ErrorJson(s, HttpStatusOf(s)); }

std::string ErrorJson(const absl::Status& s, int http) {
  const char* type = http == 401   ? "authentication_error"
                     : http == 404 ? "not_found_error"
                     : http == 413 ? "request_too_large"
                     : http == 408 ? "timeout_error"
                     : http == 503 ? "server_overloaded"
                     : http < 500  ? "invalid_request_error"
                                   : "server_error";
  // A server-side failure's message can name files, devices or kernels: clients get a generic one,
  // the server's log has the whole status.
  const std::string message =
      http >= 500 && http != 503 ? "the server failed on this request (its log says why)" : std::string(s.message());
  return JsonText(json{{"error", {{"message", message}, {"type", type}, {"code", http}}}});
}

ReplyBuilder::ReplyBuilder(const ApiJob& job, std::string id, int64_t created)
    : job_(job), id_(std::move(id)), created_(created), tool_filter_(job.tool_types.get()) {}

namespace {

// A token's bytes as OpenAI's `bytes` lists them: a piece that is part of a character shows as
// U+FFFD in `token`, and the client rebuilds the character from these.
json PieceBytes(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

json LogprobsOf(const ApiJob& job, const runtime::TokenEvent& e, const tokenizer::Tokenizer* tok) {
  if (job.kind == ApiKind::kChat) {
    json top = json::array();
    for (const auto& t : e.top) {
      const std::string piece = Piece(tok, t.token);
      top.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", PieceBytes(piece)}});
    }
    const std::string piece = Piece(tok, e.token);
    return {{"token", piece}, {"logprob", e.logprob}, {"bytes", PieceBytes(piece)}, {"top_logprobs", top}};
  }
  json top = json::object();
  for (const auto& t : e.top) top[Piece(tok, t.token)] = t.logprob;
  return {{"token", Piece(tok, e.token)}, {"logprob", e.logprob}, {"top", top}};
}

}  // namespace

bool ReplyBuilder::StoppedBy(const runtime::TokenEvent& e) const {
  const std::vector<int32_t>& ids = job_.request.stop_ids;
  return e.last && e.reason == runtime::FinishReason::kStop && e.token >= 0 &&
         std::find(ids.begin(), ids.end(), e.token) != ids.end();
}

std::string ReplyBuilder::Chunk(const runtime::TokenEvent& e) {
  std::string out;
  if (done_) return out;
  const bool chat = job_.kind == ApiKind::kChat;
  auto frame = [&](const json& choice, const json* usage) {
    json c = {{"id", id_},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", job_.model},
              {"choices", choice.is_null() ? json::array() : json::array({choice})}};
    if (usage != nullptr) c["usage"] = *usage;
    absl::StrAppend(&out, "data: ", JsonText(c), "\n\n");
  };
  if (e.reason == runtime::FinishReason::kError) {
    error_ = e.error;
    done_ = true;
    absl::StrAppend(&out, "data: ", ErrorJson(e.error.ok() ? absl::InternalError("the request failed") : e.error),
                    "\n\ndata: [DONE]\n\n");
    return out;
  }
  if (chat && !opened_) {
    frame({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}, nullptr);
    opened_ = true;
  }
  // One frame per token, its text possibly empty (bytes of a character not complete yet, or held
  // back as a possible stop string): clients see every token's timing.
  // With tools, text that is or may become a <tool_call> block is held back; closed blocks go out
  // as tool_calls deltas (one whole call each).
  std::string text = e.text;
  if (job_.tools) {
    ToolCallFilter::Out o = tool_filter_.Push(e.text);
    if (e.last) {
      ToolCallFilter::Out rest = tool_filter_.Flush();
      o.content += rest.content;
    }
    text = std::move(o.content);
    const int first = tool_filter_.calls_so_far() - static_cast<int>(o.calls.size());
    for (size_t k = 0; k < o.calls.size(); ++k) {
      const ToolCall& c = o.calls[k];
      const int index = first + static_cast<int>(k);
      json call = {{"index", index},
                   {"id", absl::StrCat("call_", id_, "_", index)},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
      frame({{"index", 0}, {"delta", {{"tool_calls", json::array({call})}}}, {"finish_reason", nullptr}}, nullptr);
    }
  }
  // A chat reply does not list the end-of-turn token that stopped it (OpenAI's shape): no frame of
  // its own, unless the client asked for the ids.
  const bool listed = e.token >= 0 && !(chat && StoppedBy(e));
  if ((listed || (e.token >= 0 && job_.token_ids)) || !text.empty()) {
    json choice = {{"index", 0}, {"finish_reason", nullptr}};
    if (chat)
      choice["delta"] = {{"content", text}};
    else
      choice["text"] = text;
    if (job_.token_ids) choice["token_ids"] = e.token >= 0 ? json::array({e.token}) : json::array();
    if (job_.logprobs && listed) {
      json lp = LogprobsOf(job_, e, job_.tokenizer);
      if (chat)
        choice["logprobs"] = {{"content", json::array({lp})}};
      else
        choice["logprobs"] = {{"tokens", json::array({lp["token"]})},
                              {"token_logprobs", json::array({lp["logprob"]})},
                              {"top_logprobs", json::array({lp["top"]})}};
    }
    frame(choice, nullptr);
  }
  if (e.last) {
    const bool called = job_.tools && tool_filter_.calls_so_far() > 0;
    json choice = {
        {"index", 0},
        {"finish_reason", called && e.reason == runtime::FinishReason::kStop ? "tool_calls" : FinishName(e.reason)}};
    if (chat)
      choice["delta"] = json::object();
    else
      choice["text"] = "";
    frame(choice, nullptr);
    if (job_.include_usage) {
      const json usage = UsageJson(e.usage);
      frame(json(), &usage);
    }
    absl::StrAppend(&out, "data: [DONE]\n\n");
    done_ = true;
  }
  return out;
}

void ReplyBuilder::Add(const runtime::TokenEvent& e) {
  if (done_) return;
  text_ += e.text;
  if (e.token >= 0) {
    tokens_.push_back(e.token);
    if (job_.logprobs && !(job_.kind == ApiKind::kChat && StoppedBy(e))) {
      runtime::TokenEvent copy = e;
      copy.text.clear();
      logprob_events_.push_back(std::move(copy));
    }
  }
  if (e.last) {
    reason_ = e.reason;
    usage_ = e.usage;
    if (e.reason == runtime::FinishReason::kError)
      error_ = e.error.ok() ? absl::InternalError("the request failed") : e.error;
    done_ = true;
  }
}

std::string ReplyBuilder::Json() const {
  const bool chat = job_.kind == ApiKind::kChat;
  json choice = {{"index", 0}, {"finish_reason", FinishName(reason_)}};
  if (job_.token_ids) choice["token_ids"] = tokens_;
  if (chat && job_.tools) {
    const AssistantReply r = ParseToolCalls(text_, job_.tool_types.get());
    json message = {{"role", "assistant"}, {"content", r.content}};
    if (!r.calls.empty()) {
      json calls = json::array();
      for (size_t i = 0; i < r.calls.size(); ++i)
        calls.push_back({{"id", absl::StrCat("call_", id_, "_", i)},
                         {"type", "function"},
                         {"function", {{"name", r.calls[i].name}, {"arguments", r.calls[i].arguments}}}});
      message["tool_calls"] = calls;
      if (r.content.empty()) message["content"] = nullptr;
      if (reason_ == runtime::FinishReason::kStop) choice["finish_reason"] = "tool_calls";
    }
    choice["message"] = message;
  } else if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  } else {
    choice["text"] = text_;
  }
  if (job_.logprobs) {
    if (chat) {
      json content = json::array();
      for (const auto& e : logprob_events_) content.push_back(LogprobsOf(job_, e, job_.tokenizer));
      choice["logprobs"] = {{"content", content}};
    } else {
      json toks = json::array(), lps = json::array(), tops = json::array();
      for (const auto& e : logprob_events_) {
        json lp = LogprobsOf(job_, e, job_.tokenizer);
        toks.push_back(lp["token"]);
        lps.push_back(lp["logprob"]);
        tops.push_back(lp["top"]);
      }
      choice["logprobs"] = {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}};
    }
  } else {
    choice["logprobs"] = nullptr;
  }
  json reply = {{"id", id_},
                {"object", chat ? "chat.completion" : "text_completion"},
                {"created", created_},
                {"model", job_.model},
                {"choices", json::array({choice})},
                {"usage", UsageJson(usage_)}};
  return JsonText(reply);
}

}  // namespace memra::server
