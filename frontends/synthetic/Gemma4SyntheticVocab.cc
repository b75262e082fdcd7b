#include "frontends/synthetic/Gemma4SyntheticVocab.h"

#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontends/gguf/GgufWriter.h"

namespace memra::synthetic {
namespace {

constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581, the escaped space
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// Chat and tool markers: the seven the converter marks USER_DEFINED (always rendered, so a chat
// parser sees them) and the CONTROL ones. Gemma 4 keeps <|turn> / <turn|> at 105 / 106; where the
// others sit in the real vocabulary does not matter to anything that reads the file by text.
struct Special {
  int32_t id;
  const char* text;
  int32_t type;
};
constexpr Special kSpecials[] = {
    {kGemma4Pad, "<pad>", kControl},
    {kGemma4Eos, "<eos>", kControl},
    {kGemma4Bos, "<bos>", kControl},
    {kGemma4Unk, "<unk>", kUnknown},
    {kGemma4Mask, "<mask>", kControl},
    {95, "<|image|>", kControl},
    {96, "<|audio|>", kControl},
    {97, "<|video|>", kControl},
    {98, "<|think|>", kControl},
    {99, "<|tool>", kControl},
    {100, "<tool|>", kControl},
    {101, "<|channel>", kUserDefined},
    {102, "<channel|>", kUserDefined},
    {103, "<|tool_call>", kUserDefined},
    {104, "<tool_call|>", kUserDefined},
    {kGemma4TurnOpen, "<|turn>", kControl},
    {kGemma4TurnClose, "<turn|>", kControl},
    {107, "<|tool_response>", kUserDefined},
    {108, "<tool_response|>", kUserDefined},
    {109, "<|\"|>", kUserDefined},
};
constexpr int32_t kFirstByte = 110;

// Words whose pieces the vocabulary holds (with and without a leading space).
constexpr const char* kWords[] = {
    "the",    "be",       "to",     "of",      "and",   "a",     "in",      "that",      "have",    "I",
    "it",     "for",      "not",    "on",      "with",  "he",    "as",      "you",       "do",      "at",
    "this",   "but",      "his",    "by",      "from",  "they",  "we",      "say",       "her",     "she",
    "or",     "an",       "will",   "my",      "one",   "all",   "would",   "there",     "their",   "what",
    "so",     "up",       "out",    "if",      "about", "who",   "get",     "which",     "go",      "me",
    "when",   "make",     "can",    "like",    "time",  "no",    "just",    "him",       "know",    "take",
    "people", "into",     "year",   "your",    "good",  "some",  "could",   "them",      "see",     "other",
    "than",   "then",     "now",    "look",    "only",  "come",  "its",     "over",      "think",   "also",
    "back",   "after",    "use",    "two",     "how",   "our",   "work",    "first",     "well",    "way",
    "even",   "new",      "want",   "because", "any",   "these", "give",    "day",       "most",    "us",
    "is",     "are",      "was",    "Hello",   "Hi",    "world", "model",   "user",      "system",  "thought",
    "answer", "question", "please", "thanks",  "help",  "write", "story",   "code",      "number",  "name",
    "What",   "How",      "Why",    "The",     "You",   "It",    "This",    "assistant", "capital", "France",
    "Paris",  "weather",  "today",  "tell",    "short", "poem",  "explain", "simple",    "words",   "sure",
};

}  // namespace

Gemma4Vocab MakeGemma4Vocab(uint32_t n_vocab) {
  Gemma4Vocab v;
  const int32_t n = static_cast<int32_t>(n_vocab);
  v.tokens.assign(n, "");
  v.types.assign(n, kUnused);
  v.scores.assign(n, 0.0f);
  for (int32_t i = 0; i < kFirstByte && i < n; ++i) v.tokens[i] = absl::StrCat("<unused", i, ">");
  for (const Special& s : kSpecials) {
    if (s.id >= n) continue;
    v.tokens[s.id] = s.text;
    v.types[s.id] = s.type;
    v.scores[s.id] = -1000.0f;
  }
  int32_t next = kFirstByte;
  absl::flat_hash_set<std::string> have;
  auto add = [&](std::string text, int32_t type) {
    if (next >= n || !have.insert(text).second) return false;
    v.tokens[next] = std::move(text);
    v.types[next] = type;
    ++next;
    return true;
  };
  for (int b = 0; b < 256; ++b) add(absl::StrFormat("<0x%02X>", b), kByte);
  // Single characters: printable ASCII, the escaped space, newline runs.
  add(kSpace, kNormal);
  for (int c = 0x21; c <= 0x7E; ++c) add(std::string(1, static_cast<char>(c)), kNormal);
  for (const char* nl : {"\n", "\n\n", "\n\n\n"}) add(nl, kNormal);
  // Word pieces by BPE training over the words (each with and without a leading space): merge
  // the most frequent adjacent pair everywhere (ties: the lexicographically smallest), until
  // every word is one token or the vocabulary is full. Encoding a trained word replays the
  // training's merges in rank order, so each word comes out as one token.
  std::vector<std::vector<std::string>> words;
  for (const char* word : kWords) {
    for (bool spaced : {true, false}) {
      const std::string w = spaced ? absl::StrCat(kSpace, word) : std::string(word);
      std::vector<std::string> chars;
      for (size_t i = 0; i < w.size();) {
        const size_t len = static_cast<unsigned char>(w[i]) >= 0x80 ? 3 : 1;  // U+2581 or ASCII
        chars.push_back(w.substr(i, len));
        i += len;
      }
      words.push_back(std::move(chars));
    }
  }
  while (next < n) {
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& w : words)
      for (size_t i = 0; i + 1 < w.size(); ++i) ++counts[{w[i], w[i + 1]}];
    if (counts.empty()) break;
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [left, right] = best->first;
    const std::string merged = left + right;
    if (!have.contains(merged) && !add(merged, kNormal)) break;
    v.merges.push_back(absl::StrCat(left, " ", right));
    for (auto& w : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == left && w[i + 1] == right) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      w = std::move(out);
    }
  }
  for (int32_t i = next; i < n; ++i) v.tokens[i] = absl::StrCat("<unused", i, ">");
  return v;
}

const char* Gemma4ChatTemplate() {
  // Gemma 4's turn format: an optional system turn (with <|think|> when thinking is on), one
  // <|turn>role ... <turn|> per message (assistant -> model, its thinking channel stripped), and
  // an empty thought channel after the generation prompt when thinking is off.
  return R"TMPL({{- bos_token -}}
{%- set ns = namespace(rest=messages, text='') -%}
{%- set thinking = enable_thinking is defined and enable_thinking -%}
{%- set has_system = messages | length > 0 and messages[0]['role'] in ['system', 'developer'] -%}
{%- if thinking or has_system -%}
{{- '<|turn>system\n' -}}
{%- if thinking -%}{{- '<|think|>\n' -}}{%- endif -%}
{%- if has_system -%}{{- messages[0]['content'] | trim -}}{%- set ns.rest = messages[1:] -%}{%- endif -%}
{{- '<turn|>\n' -}}
{%- endif -%}
{%- for message in ns.rest -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{%- set ns.text = '' -%}
{%- if message['content'] is string -%}
{%- set ns.text = message['content'] -%}
{%- else -%}
{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}{%- set ns.text = ns.text + part['text'] -%}{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- if role == 'model' -%}
{%- set kept = namespace(s='') -%}
{%- for piece in ns.text.split('<channel|>') -%}
{%- set kept.s = kept.s + (piece.split('<|channel>')[0] if '<|channel>' in piece else piece) -%}
{%- endfor -%}
{%- set ns.text = kept.s -%}
{%- endif -%}
{{- '<|turn>' + role + '\n' + (ns.text | trim) + '<turn|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|turn>model\n' -}}
{%- if not thinking -%}{{- '<|channel>thought\n<channel|>' -}}{%- endif -%}
{%- endif -%})TMPL";
}

void AddGemma4Tokenizer(uint32_t n_vocab, gguf::GgufWriter& w) {
  using gguf::Value;
  Gemma4Vocab v = MakeGemma4Vocab(n_vocab);
  w.Set("tokenizer.ggml.model", Value::String("gemma4"));
  w.Set("tokenizer.ggml.tokens", Value::StringArray(v.tokens));
  w.Set("tokenizer.ggml.scores", Value::F32Array(v.scores));
  w.Set("tokenizer.ggml.token_type", Value::I32Array(v.types));
  w.Set("tokenizer.ggml.merges", Value::StringArray(v.merges));
  w.Set("tokenizer.ggml.bos_token_id", Value::U32(kGemma4Bos));
  w.Set("tokenizer.ggml.eos_token_id", Value::U32(kGemma4Eos));
  w.Set("tokenizer.ggml.unknown_token_id", Value::U32(kGemma4Unk));
  w.Set("tokenizer.ggml.padding_token_id", Value::U32(kGemma4Pad));
  w.Set("tokenizer.ggml.mask_token_id", Value::U32(kGemma4Mask));
  w.Set("tokenizer.ggml.add_space_prefix", Value::Bool(false));
  w.Set("tokenizer.ggml.add_bos_token", Value::Bool(true));
  w.Set("tokenizer.chat_template", Value::String(Gemma4ChatTemplate()));
}

}  // namespace memra::synthetic
