#include "tools/InteractiveChat.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Json.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "ir/StatusMacros.h"

namespace memra::tools {
namespace {

using tokenizer::Json;

absl::Status InTurn(const absl::Status& st, int turn) {
  return absl::Status(st.code(), absl::StrCat("chat turn ", turn, ": ", st.message()));
}

absl::Status ContextFull(int turn, absl::string_view what, int64_t ctx) {
  return absl::ResourceExhaustedError(absl::StrCat("chat turn ", turn, ": ", what, " the context of ", ctx,
                                                   " tokens; start again with a larger context (-c/--ctx-size, now ",
                                                   ctx, ")"));
}

Json Message(absl::string_view role, std::string content) {
  Json m = Json::MakeObject();
  m.Set("role", Json(std::string(role)));
  m.Set("content", Json(std::move(content)));
  return m;
}

}  // namespace

absl::Status RunInteractiveChat(runtime::Session& s, const ChatLoopOptions& opts, std::istream& in,
                                llvm::raw_ostream& out, llvm::raw_ostream& err) {
  if (s.tokenizer() == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("interactive chat needs the model's tokenizer: ", s.tokenizer_status().message()));
  const tokenizer::Tokenizer& tok = *s.tokenizer();
  auto chat = tokenizer::ChatTemplate::FromTokenizer(tok);
  if (!chat.ok())
    return absl::Status(chat.status().code(),
                        absl::StrCat("interactive chat needs the model's chat template: ", chat.status().message()));
  if (s.position() > 0 || s.overrun_steps() > 0) MEMRA_RETURN_IF_ERROR(s.Reset());
  const int64_t ctx = s.context_length();
  auto flagged = [&] { return opts.interrupted != nullptr && opts.interrupted->load(); };

  tokenizer::ChatInputs inputs;
  inputs.add_generation_prompt = true;
  if (!opts.system_prompt.empty()) inputs.messages.Push(Message("system", opts.system_prompt));
  // The text whose tokens the session holds: the last render (up to its generation prompt) and
  // the reply generated after it. Each turn feeds what a new render adds after it.
  std::string held;
  // The state ran past the last reply's stop (device greedy chunks; exact_stop should prevent
  // it): it holds tokens `held` does not, and cannot be rolled back.
  bool resync = false;
  bool first_pending = !opts.first_message.empty();
  int turn = 0;
  while (true) {
    std::string line;
    if (first_pending) {
      line = opts.first_message;
      first_pending = false;
      if (opts.echo_prompt_marker) out << "> " << line << "\n";
    } else {
      if (opts.echo_prompt_marker) out << "> ";
      out.flush();
      // EOF ends the chat; so does a Ctrl-C while waiting for the line (llama-cli's rule).
      if (!std::getline(in, line) || flagged()) {
        if (opts.echo_prompt_marker) out << "\n";
        out.flush();
        return absl::OkStatus();
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
    }
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    ++turn;
    inputs.messages.Push(Message("user", line));
    absl::StatusOr<tokenizer::ChatPrompt> rendered = (*chat)->Render(inputs);
    if (!rendered.ok()) return InTurn(rendered.status(), turn);
    const std::string* text = &rendered->text;

    // Feed only the new suffix when the render extends what the session holds. A template whose
    // re-rendering changes earlier text (Qwen3-style templates drop the reasoning of answered
    // turns; many trim or rewrite the content; some mark the last message) breaks that: the
    // recurrent state cannot be rolled back to the common prefix, so the session is Reset and the
    // whole conversation is fed again. (llama-cli instead keeps its stale context and feeds the
    // difference of two renders.)
    ChatTurn info;
    info.turn = turn;
    absl::string_view suffix = *text;
    if (!resync && absl::StartsWith(*text, held)) {
      suffix.remove_prefix(held.size());
    } else {
      info.re_prefilled = s.position() > 0;
      MEMRA_RETURN_IF_ERROR(s.Reset());
      held.clear();
    }
    // The messages' control texts stay text (ChatPrompt), their ranges moved to the suffix.
    const size_t offset = static_cast<size_t>(suffix.data() - text->data());
    std::vector<tokenizer::TextRange> literal;
    for (const tokenizer::TextRange& r : rendered->literal_ranges)
      if (r.end > offset) literal.push_back({r.begin > offset ? r.begin - offset : 0, r.end - offset});
    tokenizer::EncodeOptions eo = rendered->EncodeOptions();  // BOS below, once
    eo.literal_ranges = literal;
    eo.space_prefix = held.empty();  // a suffix continues the text before it
    std::vector<int32_t> ids = tok.Encode(suffix, eo);
    if (held.empty() && tok.add_bos() && (ids.empty() || ids[0] != tok.bos_id())) ids.insert(ids.begin(), tok.bos_id());
    if (ids.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("chat turn ", turn, ": the chat template rendered nothing for the new user message"));
    if (info.re_prefilled)
      err << "(the chat template rendered the earlier turns differently"
          << (resync ? " or the state ran past them" : "") << ": reading the whole conversation again, " << ids.size()
          << " tokens)\n";
    resync = false;
    const int64_t need = s.position() + static_cast<int64_t>(ids.size());
    if (need > ctx)
      return ContextFull(turn, absl::StrCat("the conversation (", need, " tokens with this message) does not fit"),
                         ctx);
    info.n_fed = static_cast<int64_t>(ids.size());

    runtime::GenerationParams gp = opts.gen;
    gp.stop_at_eog = true;
    gp.exact_stop = true;  // no device decode steps past the reply's end: the next turn continues
    gp.seed = opts.gen.seed + static_cast<uint64_t>(turn - 1);
    if (gp.n_predict < 0) gp.n_predict = ctx;  // Generate stops at a full context first
    std::string reply;
    bool stopped = false;
    auto on_token = [&](int32_t id, absl::string_view piece) {
      // The end-of-turn token: the template writes its own marker (and Generate stops here).
      if (id >= 0 && tok.IsEog(id)) return true;
      reply.append(piece.data(), piece.size());
      if (!piece.empty()) {
        out << llvm::StringRef(piece.data(), piece.size());
        out.flush();
      }
      if (flagged()) stopped = true;
      return !stopped;
    };
    absl::StatusOr<runtime::GenerationStats> st = s.Generate(ids, gp, on_token);
    if (reply.empty() || reply.back() != '\n') out << "\n";
    out.flush();
    // Any Ctrl-C during the reply was for the reply.
    if (opts.interrupted != nullptr && opts.interrupted->exchange(false)) stopped = true;
    if (!st.ok()) return InTurn(st.status(), turn);
    if (st->stopped_at_context) return ContextFull(turn, "the reply filled", ctx);

    // Make the state hold exactly `held` + reply: Generate does not decode the last token it
    // sampled. After an end-of-generation token that is right (the template writes the end of the
    // turn); after a stop by n_predict or Ctrl-C the reply text includes that token, so decode it.
    if (s.overrun_steps() > 0) {
      resync = true;
    } else if (!st->stopped_at_eog && st->n_generated > 0) {
      if (s.position() >= ctx) return ContextFull(turn, "the reply filled", ctx);
      absl::StatusOr<std::vector<float>> logits = s.Decode(st->tokens.back());
      if (!logits.ok()) return InTurn(logits.status(), turn);
    }
    held = *text + reply;
    inputs.messages.Push(Message("assistant", reply));

    if (opts.on_turn) {
      info.interrupted = stopped;
      info.position = s.position();
      info.reply = std::move(reply);
      info.stats = *std::move(st);
      opts.on_turn(info);
    }
  }
}

}  // namespace memra::tools
