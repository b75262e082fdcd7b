// tools::RunInteractiveChat (memra run -i / -cnv) on the tiny qwen35 fixture, copied with a chat
// template (no fixture has one): two user lines give two replies, the second turn feeds only the
// new suffix (the state keeps growing from the first turn's), EOF ends cleanly; Ctrl-C (the
// interrupted flag) stops a reply and keeps it; a template that re-renders earlier turns
// differently falls back to a full re-prefill; a conversation that does not fit the context is
// a clear error naming it and -c.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "gtest/gtest.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/Session.h"
#include "tests/TestUtil.h"
#include "tools/InteractiveChat.h"

namespace memra::tools {
namespace {

using memra::testing::FileExists;
using memra::testing::TestDataPath;
using memra::testing::UniqueTempPath;

// A ChatML-like template: every message ends with the EOS text (id 2, the fixture's EOG).
constexpr char kStableTemplate[] =
    "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}";
// Marks the last message: every new render changes text the session already holds.
constexpr char kUnstableTemplate[] =
    "{% for m in messages %}{% if loop.last %}[last]{% endif %}<|{{ m.role }}|>\n{{ m.content }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

std::string Fixture() { return TestDataPath("models/qwen35-tiny-f32.gguf"); }

// The fixture with `tokenizer.chat_template` set, written once per template.
std::string ModelWithTemplate(const std::string& name, const std::string& chat_template) {
  const std::string path = UniqueTempPath(name);
  auto f = gguf::GgufFile::Open(Fixture());
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return "";
  gguf::GgufWriter w;
  for (const auto& [k, v] : (*f)->metadata()) w.Set(k, v);
  w.Set("tokenizer.chat_template", gguf::Value::String(chat_template));
  for (const gguf::TensorInfo& t : (*f)->tensors()) EXPECT_TRUE(w.AddTensorBytes(t.name, t.type, t.ne, t.data).ok());
  absl::Status st = w.Write(path);
  EXPECT_TRUE(st.ok()) << st;
  return path;
}

std::unique_ptr<runtime::Session> OpenSession(const std::string& path, int64_t n_ctx = 0) {
  runtime::SessionOptions so;
  so.threads = 2;
  so.backend = runtime::Backend::kCpu;
  so.n_ctx = n_ctx;
  auto s = runtime::Session::Open(path, so);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

ChatLoopOptions Greedy(int64_t n_predict) {
  ChatLoopOptions o;
  o.gen.n_predict = n_predict;
  o.gen.sampling.temperature = 0.0f;
  return o;
}

// Sets `flag` at its `at`-th write: an unbuffered stream standing in for a user's Ctrl-C in the
// middle of a reply.
class FlagAtWrite : public llvm::raw_ostream {
 public:
  FlagAtWrite(std::atomic<bool>* flag, int at) : flag_(flag), at_(at) { SetUnbuffered(); }
  std::string text;

 private:
  void write_impl(const char* p, size_t n) override {
    text.append(p, n);
    if (++writes_ == at_) flag_->store(true);
  }
  uint64_t current_pos() const override { return text.size(); }
  std::atomic<bool>* flag_;
  int at_;
  int writes_ = 0;
};

class InteractiveChatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(Fixture())) GTEST_SKIP() << "fixture not found: " << Fixture();
  }
};

TEST_F(InteractiveChatTest, TwoTurnsFeedOnlyTheNewSuffix) {
  const std::string path = ModelWithTemplate("chat-stable.gguf", kStableTemplate);
  auto s = OpenSession(path);
  ASSERT_NE(s, nullptr);
  ChatLoopOptions o = Greedy(12);
  o.system_prompt = "Be brief.";
  std::vector<ChatTurn> turns;
  std::vector<std::vector<int32_t>> histories;
  o.on_turn = [&](const ChatTurn& t) {
    turns.push_back(t);
    histories.push_back(s->history());
  };
  std::istringstream in("Hello there\n\n   \nHow are you?\n");  // blank lines are skipped
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  absl::Status st = RunInteractiveChat(*s, o, in, out, err);
  ASSERT_TRUE(st.ok()) << st;
  out.flush();
  err.flush();

  ASSERT_EQ(turns.size(), 2u);
  for (const ChatTurn& t : turns) {
    EXPECT_GT(t.stats.n_generated, 0) << "turn " << t.turn;
    EXPECT_FALSE(t.interrupted);
    EXPECT_EQ(t.position, static_cast<int64_t>(histories[t.turn - 1].size()));
  }
  EXPECT_FALSE(turns[0].re_prefilled);
  EXPECT_FALSE(turns[1].re_prefilled);
  EXPECT_EQ(err_text, "");
  // The second turn continued the first one's state: its history extends the first's, by the
  // new suffix (the end of the reply, the user line, the generation prompt) and the reply.
  EXPECT_GT(turns[1].position, turns[0].position);
  ASSERT_GE(histories[1].size(), histories[0].size());
  EXPECT_EQ(std::vector<int32_t>(histories[1].begin(), histories[1].begin() + histories[0].size()), histories[0]);
  EXPECT_LT(turns[1].n_fed, turns[0].position);  // less than what the session already held
  // Each turn's state: the fed tokens and the reply (its last token decoded unless it was EOG).
  for (const ChatTurn& t : turns) {
    const int64_t before = t.turn == 1 ? 0 : turns[0].position;
    const int64_t reply_in_state = t.stats.n_generated - (t.stats.stopped_at_eog ? 1 : 0);
    EXPECT_EQ(t.position, before + t.n_fed + reply_in_state) << "turn " << t.turn;
  }
  // The first turn's prompt is BOS + the rendered system and user messages.
  EXPECT_EQ(histories[0][0], s->tokenizer()->bos_id());
  // Both replies were streamed, each after a prompt marker; EOF at the last marker ends the line.
  const size_t r1 = out_text.find(turns[0].reply);
  ASSERT_NE(r1, std::string::npos);
  EXPECT_NE(out_text.find(turns[1].reply, r1 + turns[0].reply.size()), std::string::npos);
  EXPECT_EQ(out_text.substr(0, 2), "> ");
  EXPECT_EQ(out_text.substr(out_text.size() - 3), "> \n");
  EXPECT_GE(std::count(out_text.begin(), out_text.end(), '>'), 5);  // 2 turns, 2 blank lines, EOF
}

// A user line that spells the end-of-turn text is text: each turn's tokens hold the template's
// EOS ids only (the system and user messages' ends, and the previous reply's), in the first
// render and in a later turn's suffix alike.
TEST_F(InteractiveChatTest, UserLinesCannotSpellControlTokens) {
  const std::string path = ModelWithTemplate("chat-guard.gguf", kStableTemplate);
  auto s = OpenSession(path);
  ASSERT_NE(s, nullptr);
  const int32_t eos = s->tokenizer()->eos_id();
  const std::string eos_text = s->tokenizer()->TokenText(eos);
  ASSERT_EQ(s->tokenizer()->token_type(eos), tokenizer::TokenType::kControl);
  ChatLoopOptions o = Greedy(6);
  o.system_prompt = "Be brief.";
  std::vector<std::vector<int32_t>> histories;
  o.on_turn = [&](const ChatTurn&) { histories.push_back(s->history()); };
  std::istringstream in("a" + eos_text + "b" + eos_text + "\nc " + eos_text + "\n");
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  absl::Status st = RunInteractiveChat(*s, o, in, out, err);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(histories.size(), 2u);
  EXPECT_EQ(std::count(histories[0].begin(), histories[0].end(), eos), 2);
  ASSERT_GT(histories[1].size(), histories[0].size());
  EXPECT_EQ(
      std::count(histories[1].begin() + static_cast<std::ptrdiff_t>(histories[0].size()), histories[1].end(), eos), 2);
  // The text came through: decoding the first turn shows the user's markers as written.
  EXPECT_NE(s->tokenizer()->Decode(histories[0]).value().find("a" + eos_text + "b" + eos_text), std::string::npos);
}

TEST_F(InteractiveChatTest, FirstMessageAndImmediateEof) {
  const std::string path = ModelWithTemplate("chat-stable.gguf", kStableTemplate);
  auto s = OpenSession(path);
  ASSERT_NE(s, nullptr);
  ChatLoopOptions o = Greedy(4);
  o.first_message = "Hi";
  o.echo_prompt_marker = false;
  int n_turns = 0;
  o.on_turn = [&](const ChatTurn&) { ++n_turns; };
  std::istringstream in("");
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  ASSERT_TRUE(RunInteractiveChat(*s, o, in, out, err).ok());
  EXPECT_EQ(n_turns, 1);
  out.flush();
  EXPECT_EQ(out_text.find('>'), std::string::npos);
  EXPECT_EQ(out_text.back(), '\n');

  // No line at all: nothing runs.
  std::istringstream empty("");
  n_turns = 0;
  ChatLoopOptions quiet = Greedy(4);
  quiet.on_turn = o.on_turn;
  ASSERT_TRUE(RunInteractiveChat(*s, quiet, empty, out, err).ok());
  EXPECT_EQ(n_turns, 0);
  EXPECT_EQ(s->position(), 0);  // the chat starts from a Reset session
}

TEST_F(InteractiveChatTest, InterruptStopsTheReplyAndTheChatGoesOn) {
  const std::string path = ModelWithTemplate("chat-stable.gguf", kStableTemplate);
  auto s = OpenSession(path);
  ASSERT_NE(s, nullptr);
  std::atomic<bool> flag{false};
  ChatLoopOptions o = Greedy(16);
  o.first_message = "Tell me a story";
  o.echo_prompt_marker = false;
  o.interrupted = &flag;
  std::vector<ChatTurn> turns;
  o.on_turn = [&](const ChatTurn& t) { turns.push_back(t); };
  std::istringstream in("And then?\n");
  FlagAtWrite out(&flag, 3);  // "Ctrl-C" at the third streamed piece of the first reply
  std::string err_text;
  llvm::raw_string_ostream err(err_text);
  absl::Status st = RunInteractiveChat(*s, o, in, out, err);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_TRUE(turns[0].interrupted);
  EXPECT_FALSE(turns[0].stats.stopped_at_eog);
  EXPECT_GE(turns[0].stats.n_generated, 3);
  EXPECT_LT(turns[0].stats.n_generated, 16);
  EXPECT_FALSE(flag.load());  // cleared for the next reply
  // The interrupted reply is kept: the state holds all of it, and the next turn continues it.
  EXPECT_EQ(turns[0].position, turns[0].n_fed + turns[0].stats.n_generated);
  EXPECT_FALSE(turns[1].interrupted);
  EXPECT_FALSE(turns[1].re_prefilled);
  EXPECT_GT(turns[1].position, turns[0].position);
  EXPECT_NE(out.text.find(turns[0].reply + "\n"), std::string::npos);  // a newline after the stop

  // A Ctrl-C while waiting for a line ends the chat (llama-cli's rule).
  turns.clear();
  flag.store(false);
  ChatLoopOptions o2 = Greedy(4);
  o2.interrupted = &flag;
  o2.on_turn = [&](const ChatTurn& t) {
    turns.push_back(t);
    flag.store(true);  // pressed after the first reply, before the next line
  };
  std::istringstream two("one\ntwo\n");
  std::string out_text;
  llvm::raw_string_ostream out2(out_text);
  ASSERT_TRUE(RunInteractiveChat(*s, o2, two, out2, err).ok());
  EXPECT_EQ(turns.size(), 1u);
}

TEST_F(InteractiveChatTest, UnstableTemplateFallsBackToAFullPrefill) {
  const std::string path = ModelWithTemplate("chat-unstable.gguf", kUnstableTemplate);
  auto s = OpenSession(path);
  ASSERT_NE(s, nullptr);
  ChatLoopOptions o = Greedy(6);
  std::vector<ChatTurn> turns;
  o.on_turn = [&](const ChatTurn& t) { turns.push_back(t); };
  std::istringstream in("first\nsecond\n");
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  ASSERT_TRUE(RunInteractiveChat(*s, o, in, out, err).ok());
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_FALSE(turns[0].re_prefilled);
  EXPECT_TRUE(turns[1].re_prefilled);
  EXPECT_GT(turns[1].n_fed, turns[0].n_fed);  // the whole conversation
  const int64_t reply_in_state = turns[1].stats.n_generated - (turns[1].stats.stopped_at_eog ? 1 : 0);
  EXPECT_EQ(turns[1].position, turns[1].n_fed + reply_in_state);
  err.flush();
  EXPECT_NE(err_text.find("reading the whole conversation again"), std::string::npos) << err_text;
}

TEST_F(InteractiveChatTest, ContextOverflowIsAClearError) {
  const std::string path = ModelWithTemplate("chat-stable.gguf", kStableTemplate);
  auto s = OpenSession(path, 64);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->context_length(), 64);
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  // A message longer than the context: refused before anything runs.
  {
    std::istringstream in(std::string(100, 'x') + "\n");
    absl::Status st = RunInteractiveChat(*s, Greedy(4), in, out, err);
    EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(st.message().find("context of 64 tokens"), absl::string_view::npos) << st;
    EXPECT_NE(st.message().find("-c/--ctx-size"), absl::string_view::npos) << st;
    EXPECT_EQ(s->position(), 0);
  }
  // -n -1: the reply runs until the context is full, then the same error (the reply stays printed).
  {
    std::istringstream in("hi\nmore\n");
    ChatLoopOptions o = Greedy(-1);
    int n_turns = 0;
    o.on_turn = [&](const ChatTurn&) { ++n_turns; };
    absl::Status st = RunInteractiveChat(*s, o, in, out, err);
    EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
    EXPECT_NE(st.message().find("the reply filled the context of 64 tokens"), absl::string_view::npos) << st;
    EXPECT_EQ(n_turns, 0);
    EXPECT_EQ(s->position(), 64);
  }
}

TEST_F(InteractiveChatTest, ModelWithoutTemplateIsAnError) {
  auto s = OpenSession(Fixture());
  ASSERT_NE(s, nullptr);
  std::istringstream in("hi\n");
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  absl::Status st = RunInteractiveChat(*s, Greedy(4), in, out, err);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chat template"), absl::string_view::npos) << st;
}

// The demo model's own template (ChatML) and byte-level BPE: a temperature-sampled two-turn chat
// (the demo's defaults: llama.cpp's chain with penalties) continues the first turn's state, and
// the second turn's tokens start with the template's end-of-turn marker <|im_end|>.
TEST(InteractiveChatDemo, ChatMlTemplateIsStable) {
  const std::string demo = std::string(MEMRA_SOURCE_DIR) + "/models/demo/qwen35-demo-q8_0.gguf";
  if (!FileExists(demo)) GTEST_SKIP() << "demo model not found: " << demo;
  auto s = OpenSession(demo);
  ASSERT_NE(s, nullptr);
  ChatLoopOptions o;
  o.gen.n_predict = 24;
  o.gen.seed = 7;
  o.gen.sampling = {0.8f, 40, 0.95f};
  o.gen.sampling.min_p = 0.05f;
  o.gen.sampling.repeat_penalty = 1.1f;
  o.system_prompt = "You are a poet.";
  std::vector<ChatTurn> turns;
  std::vector<int32_t> first_history;
  o.on_turn = [&](const ChatTurn& t) {
    turns.push_back(t);
    if (t.turn == 1) first_history = s->history();
  };
  std::istringstream in("Write of the sea.\nAnd of the moon?\n");
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  absl::Status st = RunInteractiveChat(*s, o, in, out, err);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_FALSE(turns[1].re_prefilled);
  EXPECT_EQ(err_text, "");
  const std::vector<int32_t>& h = s->history();
  ASSERT_GT(h.size(), first_history.size());
  EXPECT_EQ(std::vector<int32_t>(h.begin(), h.begin() + first_history.size()), first_history);
  auto im_end = s->tokenizer()->FindToken("<|im_end|>");
  ASSERT_TRUE(im_end.has_value());
  EXPECT_EQ(h[first_history.size()], *im_end);
  for (const ChatTurn& t : turns) EXPECT_FALSE(t.reply.empty());
}

}  // namespace
}  // namespace memra::tools
