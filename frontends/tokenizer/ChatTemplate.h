// Chat prompts from a model's chat template (`tokenizer.chat_template`, HF Jinja), as
// transformers' apply_chat_template / llama.cpp's --jinja render them. The template engine is
// the Jinja subset in Jinja.h; unsupported syntax is a clear error at Create time.
//
//   auto chat = ChatTemplate::FromTokenizer(tok);
//   ChatInputs in;
//   in.messages = ChatInputs::Messages({{"system", "You are helpful."}, {"user", "Hi!"}});
//   ChatPrompt prompt = (*chat)->Render(in).value();
//   std::vector<int32_t> ids = tok.Encode(prompt.text, prompt.EncodeOptions());
//
// The template's control tokens are parsed; the same texts inside the messages stay text
// (ControlTextGuard.h says why and how).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/tokenizer/ControlTextGuard.h"
#include "frontends/tokenizer/Jinja.h"
#include "frontends/tokenizer/Json.h"
#include "frontends/tokenizer/Tokenizer.h"

namespace memra::tokenizer {

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

// A rendered prompt: its text and the byte ranges in it where a message spelled a control token.
struct ChatPrompt {
  std::string text;
  std::vector<TextRange> literal_ranges;
  // No BOS / EOS added (the template writes them); control tokens parsed outside literal_ranges.
  tokenizer::EncodeOptions EncodeOptions() const;
};

class ChatTemplate {
 public:
  // `bos_token` / `eos_token`: the texts the template sees as those variables.
  // `control_texts`: the texts a message may not turn into control tokens (the tokenizer's
  // ControlTexts(); FromTokenizer passes them).
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Create(absl::string_view source, std::string bos_token,
                                                              std::string eos_token,
                                                              std::vector<std::string> control_texts = {});
  // The tokenizer's `tokenizer.chat_template` (NotFound if the model has none), with its BOS /
  // EOS token texts as bos_token / eos_token (llama.cpp's choice).
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromTokenizer(const Tokenizer& tok);

  // The prompt, its messages' control texts guarded (valid UTF-8: invalid bytes become U+FFFD).
  absl::StatusOr<ChatPrompt> Render(const ChatInputs& inputs) const;
  // Render's text alone.
  absl::StatusOr<std::string> Apply(const ChatInputs& inputs) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate() = default;
  std::string source_, bos_token_, eos_token_;
  std::unique_ptr<jinja::Template> template_;
  std::unique_ptr<ControlTextGuard> guard_;
};

}  // namespace memra::tokenizer
