#include "frontends/tokenizer/ChatTemplate.h"

#include "absl/strings/str_cat.h"
#include "frontends/tokenizer/Tokenizer.h"
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

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Create(absl::string_view source, std::string bos_token,
                                                                   std::string eos_token) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
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
  return Create(tok.chat_template(), text(tok.bos_id()), text(tok.eos_id()));
}

absl::StatusOr<std::string> ChatTemplate::Apply(const ChatInputs& in) const {
  if (!in.messages.is_array()) return absl::InvalidArgumentError("chat: messages must be a list");
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
  return template_->Render(ctx);
}

}  // namespace memra::tokenizer
