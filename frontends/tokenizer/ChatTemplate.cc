#include "frontends/tokenizer/ChatTemplate.h"

#include "absl/strings/str_cat.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "frontends/tokenizer/Utf8.h"
#include "ir/StatusMacros.h"

namespace memra::tokenizer {

Json ChatInputs::Messages(std::initializer_list<std::pair<std::string, std::string>> role_content) {
  Json msgs = Json::MakeArray();
  for (const auto& [role, content] : role_content) {
    Json m = Json::MakeObject();
    m.Set("role", Json(role));
    m.Set("content", Json(content));
    msgs.Push(std::move(m));
  }
  return msgs;
}

tokenizer::EncodeOptions ChatPrompt::EncodeOptions() const {
  tokenizer::EncodeOptions eo;
  eo.add_special = false;
  eo.parse_special = true;
  eo.literal_ranges = literal_ranges;
  return eo;
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Create(absl::string_view source, std::string bos_token,
                                                                   std::string eos_token,
                                                                   std::vector<std::string> control_texts) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  t->guard_ = std::make_unique<ControlTextGuard>(std::move(control_texts));
  t->source_ = std::string(source);
  t->bos_token_ = std::move(bos_token);
  t->eos_token_ = std::move(eos_token);
  MEMRA_ASSIGN_OR_RETURN(t->template_, jinja::Template::Parse(t->source_));
  return t;
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromTokenizer(const Tokenizer& tok) {
  if (tok.chat_template().empty())
    return absl::NotFoundError("the model has no chat template (tokenizer.chat_template)");
  auto text = [&](int32_t id) { return tok.IsValidId(id) ? tok.TokenText(id) : std::string(); };
  return Create(tok.chat_template(), text(tok.bos_id()), text(tok.eos_id()), tok.ControlTexts());
}

absl::StatusOr<std::string> ChatTemplate::Apply(const ChatInputs& in) const {
  MEMRA_ASSIGN_OR_RETURN(ChatPrompt p, Render(in));
  return std::move(p.text);
}

absl::StatusOr<ChatPrompt> ChatTemplate::Render(const ChatInputs& request) const {
  if (!request.messages.is_array()) return absl::InvalidArgumentError("chat: messages must be a list");
  // Every string of the request guarded; bos_token / eos_token and add_generation_prompt are the
  // model's and the server's, not the client's.
  ChatInputs in;
  in.messages = guard_->Guard(request.messages);
  in.tools = guard_->Guard(request.tools);
  in.extra = guard_->Guard(request.extra);
  in.add_generation_prompt = request.add_generation_prompt;
  Json ctx = Json::MakeObject();
  ctx.Set("messages", in.messages);
  ctx.Set("add_generation_prompt", Json(in.add_generation_prompt));
  ctx.Set("bos_token", Json(bos_token_));
  ctx.Set("eos_token", Json(eos_token_));
  if (in.tools.is_array() && in.tools.size() > 0) {
    Json tools = Json::MakeArray();
    for (const Json& t : in.tools.array()) {
      if (t.is_object() && !t.Find("type") && t.Find("name")) {
        Json wrapped = Json::MakeObject();
        wrapped.Set("type", Json("function"));
        wrapped.Set("function", t);
        tools.Push(std::move(wrapped));
      } else {
        tools.Push(t);
      }
    }
    ctx.Set("tools", std::move(tools));
  } else if (!in.tools.is_null() && !in.tools.is_array()) {
    return absl::InvalidArgumentError("chat: tools must be a list");
  }
  for (const auto& [k, v] : in.extra.object()) ctx.Set(k, v);
  MEMRA_ASSIGN_OR_RETURN(std::string rendered, template_->Render(ctx));
  // Byte ranges must hold for the tokenizer, which would otherwise sanitize (and shift) them.
  if (!IsValidUtf8(rendered)) rendered = SanitizeUtf8(rendered);
  ChatPrompt prompt;
  prompt.text = guard_->Restore(rendered, &prompt.literal_ranges);
  return prompt;
}

}  // namespace memra::tokenizer
