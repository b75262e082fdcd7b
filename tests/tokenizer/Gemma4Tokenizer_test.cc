// Gemma 4's tokenizer (tokenizer.ggml.model "gemma4", llama.cpp's SPM-style BPE) on the vocabulary
// memra gen writes into synthetic gemma4 models (Gemma's special tokens, <0xXX> bytes, U+2581
// pieces built by rank merges), and its chat template on a multi-turn conversation.
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/synthetic/Gemma4SyntheticVocab.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "gtest/gtest.h"
#include "tests/TestUtil.h"

namespace memra::tokenizer {
namespace {

constexpr char kSp[] = "\xE2\x96\x81";  // U+2581

class Gemma4TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    synthetic::Gemma4Vocab v = synthetic::MakeGemma4Vocab(2048);
    VocabSpec spec;
    spec.model = ModelType::kGemma4;
    spec.pre = "gemma4";
    spec.tokens = v.tokens;
    spec.scores = v.scores;
    for (int32_t t : v.types) spec.types.push_back(static_cast<TokenType>(t));
    spec.merges = v.merges;
    spec.bos_id = synthetic::kGemma4Bos;
    spec.eos_id = synthetic::kGemma4Eos;
    spec.unk_id = synthetic::kGemma4Unk;
    spec.pad_id = synthetic::kGemma4Pad;
    spec.add_bos = true;
    spec.chat_template = synthetic::Gemma4ChatTemplate();
    auto tok = Tokenizer::Create(std::move(spec));
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = tok->release();
  }
  static std::vector<std::string> Pieces(const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(tok_->TokenText(id));
    return out;
  }
  static int32_t Id(const std::string& text) {
    auto id = tok_->FindToken(text);
    EXPECT_TRUE(id.has_value()) << text;
    return id.value_or(-1);
  }
  static EncodeOptions Plain() {
    EncodeOptions o;
    o.add_special = false;
    return o;
  }
  static inline Tokenizer* tok_ = nullptr;
};

TEST_F(Gemma4TokenizerTest, SpacesBecomeU2581AndWordsMergeByRank) {
  EXPECT_EQ(Pieces(tok_->Encode("Hello world", Plain())),
            (std::vector<std::string>{"Hello", std::string(kSp) + "world"}));
  // No space prefix: a word at the start of the text has no U+2581; a double space keeps one
  // U+2581 of its own (no merge joins two of them).
  EXPECT_EQ(Pieces(tok_->Encode("the  the", Plain())),
            (std::vector<std::string>{"the", kSp, std::string(kSp) + "the"}));
  // Words the vocabulary lacks fall apart into the merges that exist.
  EXPECT_EQ(Pieces(tok_->Encode(" thez", Plain())), (std::vector<std::string>{std::string(kSp) + "the", "z"}));
  // BOS comes first whenever specials are added.
  const std::vector<int32_t> with_bos = tok_->Encode("Hi");
  ASSERT_EQ(with_bos.size(), 2u);
  EXPECT_EQ(with_bos[0], synthetic::kGemma4Bos);
}

TEST_F(Gemma4TokenizerTest, NewlineRunsAreTheirOwnWords) {
  // A run of newlines that is a token is that token; a longer run falls back to characters.
  EXPECT_EQ(Pieces(tok_->Encode("Hi\n\nthe", Plain())), (std::vector<std::string>{"Hi", "\n\n", "the"}));
  EXPECT_EQ(Pieces(tok_->Encode("a\n\n\n\nb", Plain())), (std::vector<std::string>{"a", "\n", "\n", "\n", "\n", "b"}));
  // Text never merges across a newline: "▁the" does not form from " \nthe".
  EXPECT_EQ(Pieces(tok_->Encode(" \nthe", Plain())), (std::vector<std::string>{kSp, "\n", "the"}));
}

TEST_F(Gemma4TokenizerTest, ByteFallbackAndExactRoundTrip) {
  // é is no token: its two UTF-8 bytes are <0xC3><0xA9>.
  EXPECT_EQ(Pieces(tok_->Encode("é", Plain())), (std::vector<std::string>{"<0xC3>", "<0xA9>"}));
  for (const std::string text :
       {"Hello world, the capital of France is Paris.", "  leading and trailing  ", "tabs\tand\nnewlines\n\n\nmixed",
        "naïve café — 東京 🙂", "<|turn> not parsed? <eos>"}) {
    auto back = tok_->Decode(tok_->Encode(text, Plain()));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, text);
  }
  // Streaming gives the same text, a character split across byte tokens held back until whole.
  StreamingDecoder sd(*tok_);
  std::string streamed;
  for (int32_t id : tok_->Encode("café 東京", Plain())) {
    auto piece = sd.Push(id);
    ASSERT_TRUE(piece.ok());
    streamed += *piece;
  }
  streamed += sd.Flush();
  EXPECT_EQ(streamed, "café 東京");
}

TEST_F(Gemma4TokenizerTest, SpecialTokensAndEndOfGeneration) {
  const std::vector<int32_t> ids = tok_->Encode("<|turn>user\nHi<turn|>\n", Plain());
  EXPECT_EQ(ids, (std::vector<int32_t>{synthetic::kGemma4TurnOpen, Id("user"), Id("\n"), Id("Hi"),
                                       synthetic::kGemma4TurnClose, Id("\n")}));
  // CONTROL tokens are only matched when specials are parsed; USER_DEFINED ones always are.
  EncodeOptions text_only = Plain();
  text_only.parse_special = false;
  const std::vector<int32_t> plain = tok_->Encode("<|turn><|channel>", text_only);
  EXPECT_NE(plain.front(), synthetic::kGemma4TurnOpen);
  EXPECT_EQ(plain.back(), Id("<|channel>"));
  // Gemma 4 ends generation on <eos>, <turn|> and <|tool_response>, not on <|turn>.
  EXPECT_TRUE(tok_->IsEog(synthetic::kGemma4Eos));
  EXPECT_TRUE(tok_->IsEog(synthetic::kGemma4TurnClose));
  EXPECT_TRUE(tok_->IsEog(Id("<|tool_response>")));
  EXPECT_FALSE(tok_->IsEog(synthetic::kGemma4TurnOpen));
  EXPECT_FALSE(tok_->IsEog(synthetic::kGemma4Bos));
  // USER_DEFINED markers render even when control tokens are hidden.
  DecodeOptions hide;
  hide.render_special = false;
  auto shown = tok_->Decode({synthetic::kGemma4TurnOpen, Id("<|channel>"), Id("Hi")}, hide);
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(*shown, "<|channel>Hi");
}

TEST_F(Gemma4TokenizerTest, MultiTurnChatRender) {
  auto chat = ChatTemplate::FromTokenizer(*tok_);
  ASSERT_TRUE(chat.ok()) << chat.status();
  ChatInputs in;
  in.messages = ChatInputs::Messages({{"system", "  Be brief.  "},
                                      {"user", "What is the capital of France?"},
                                      {"assistant", "<|channel>thought\nEasy.<channel|>Paris."},
                                      {"user", "And of Italy?\n"}});
  auto prompt = (*chat)->Apply(in);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt,
            "<bos><|turn>system\nBe brief.<turn|>\n"
            "<|turn>user\nWhat is the capital of France?<turn|>\n"
            "<|turn>model\nParis.<turn|>\n"
            "<|turn>user\nAnd of Italy?<turn|>\n"
            "<|turn>model\n<|channel>thought\n<channel|>");
  // Thinking on: <|think|> opens the system turn and the generation prompt has no empty channel.
  in.extra.Set("enable_thinking", Json(true));
  in.messages = ChatInputs::Messages({{"user", "Hi"}});
  prompt = (*chat)->Apply(in);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt, "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  // The rendered prompt encodes (specials parsed, no second BOS) to the turn tokens.
  const std::vector<int32_t> ids = tok_->Encode(*prompt, Plain());
  EXPECT_EQ(ids.front(), synthetic::kGemma4Bos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), synthetic::kGemma4Bos), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), synthetic::kGemma4TurnOpen), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), synthetic::kGemma4TurnClose), 2);
}

TEST(Gemma4TokenizerGgufTest, ReadAsLlamaCppReadsIt) {
  // A file as Gemma 4's converter writes it, but with add_bos_token false and a stray pre: llama.cpp
  // forces add_bos on and the gemma4 pre-tokenizer for this model type.
  gguf::GgufWriter w;
  w.Set("general.architecture", gguf::Value::String("gemma4"));
  synthetic::AddGemma4Tokenizer(600, w);
  w.Set("tokenizer.ggml.add_bos_token", gguf::Value::Bool(false));
  w.Set("tokenizer.ggml.pre", gguf::Value::String("default"));
  const std::string path = memra::testing::UniqueTempPath("gemma4-vocab.gguf");
  ASSERT_TRUE(w.Write(path).ok());
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->model(), ModelType::kGemma4);
  EXPECT_EQ((*tok)->pre(), "gemma4");
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->n_vocab(), 600);
  EXPECT_FALSE((*tok)->chat_template().empty());
  // Without merges the file is refused, naming the key (llama.cpp requires them too).
  gguf::GgufWriter bad;
  bad.Set("tokenizer.ggml.model", gguf::Value::String("gemma4"));
  bad.Set("tokenizer.ggml.tokens", gguf::Value::StringArray({"<pad>", "a"}));
  const std::string bad_path = memra::testing::UniqueTempPath("gemma4-nomerges.gguf");
  ASSERT_TRUE(bad.Write(bad_path).ok());
  auto bad_file = gguf::GgufFile::Open(bad_path);
  ASSERT_TRUE(bad_file.ok());
  auto refused = Tokenizer::FromGguf(**bad_file);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tokenizer.ggml.merges"), std::string::npos) << refused.status();
  std::remove(path.c_str());
  std::remove(bad_path.c_str());
}

}  // namespace
}  // namespace memra::tokenizer
