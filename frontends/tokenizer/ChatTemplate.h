// Chat prompts from a model's chat template (`tokenizer.chat_template`, HF Jinja), as
// transformers' apply_chat_template / llama.cpp's --jinja render them. The template engine is
// the Jinja subset in Jinja.h; unsupported syntax is a clear error at Create time.
//
//   auto chat = ChatTemplate::FromTokenizer(tok);
//   ChatInputs in;
//   in.messages = ChatInputs::Messages({{"system", "You are helpful."}, {"user", "Hi!"}});
//   std::string prompt = (*chat)->Apply(in).value();
//   std::vector<int32_t> ids = tok.Encode(prompt, {.add_special = false});  // specials parsed
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/tokenizer/Jinja.h"
#include "frontends/tokenizer/Json.h"

namespace memra::tokenizer {

class Tokenizer;

struct ChatInputs {
  // [{"role": ..., "content": ..., optional "reasoning_content", "tool_calls", ...}, ...]
  Json messages = Json::MakeArray();
  // null, or a list of tools. Bare function schemas ({"name", "description", "parameters"}) are
  // wrapped as {"type": "function", "function": schema}, the OpenAI form templates expect (what
  // transformers and llama.cpp hand them).
  Json tools;
  bool add_generation_prompt = true;
  // More template variables (e.g. {"enable_thinking": false}); they override the defaults.
  Json extra = Json::MakeObject();

  static Json Messages(std::initializer_list<std::pair<std::string, std::string>> role_content);
};

class ChatTemplate {
 public:
  // `bos_token` / `eos_token`: the texts the template sees as those variables.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Create(absl::string_view source, std::string bos_token,
                                                              std::string eos_token);
  // The tokenizer's `tokenizer.chat_template` (NotFound if the model has none), with its BOS /
  // EOS token texts as bos_token / eos_token (llama.cpp's choice).
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromTokenizer(const Tokenizer& tok);

  absl::StatusOr<std::string> Apply(const ChatInputs& inputs) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate() = default;
  std::string source_, bos_token_, eos_token_;
  std::unique_ptr<jinja::Template> template_;
};

}  // namespace memra::tokenizer
