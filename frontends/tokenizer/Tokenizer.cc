#include "frontends/tokenizer/Tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "frontends/tokenizer/Utf8.h"
#include "ir/StatusMacros.h"
#include "unicode/bytestream.h"
#include "unicode/normalizer2.h"
#include "unicode/regex.h"
#include "unicode/unistr.h"

namespace memra::tokenizer {
namespace {

constexpr absl::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the others to 256+n.
std::vector<char32_t> ByteToUnicodeTable() {
  std::vector<char32_t> table(256);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
  }
  return table;
}

// Pre-tokenizer patterns (llama.cpp's forms of the HF regexes: the case-insensitive contraction
// group spelled out ASCII-only, as HF's JS port and llama.cpp do). `\s` is Unicode White_Space
// (as in HF's Oniguruma and llama.cpp), not ICU's narrower [\t\n\f\r\p{Z}].
std::optional<std::string> PrePattern(absl::string_view pre) {
  std::string p;
  if (pre == "qwen2" || pre == "stablelm2" || pre == "hunyuan") {
    p = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  } else if (pre == "qwen35") {
    p = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  } else if (pre == "llama3" || pre == "llama-bpe" || pre == "smaug-bpe" || pre == "dbrx") {
    p = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  } else if (pre == "gpt2" || pre == "default" || pre.empty()) {
    p = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  } else {
    return std::nullopt;
  }
  return absl::StrReplaceAll(p, {{"\\s", "\\p{White_Space}"}, {"\\S", "\\P{White_Space}"}});
}

// llama.cpp's end-of-generation texts (CONTROL tokens with these texts end generation).
// Gemma 4 ends a turn with <turn|> and hands over to a tool with <|tool_response>.
constexpr absl::string_view kEogTexts[] = {
    "<|eot_id|>",   "<|im_end|>", "<|end|>",         "<end_of_turn>",      "<|endoftext|>", "<|eom_id|>",
    "<EOT>",        "_<EOT>",     "<|end_of_text|>", "<end_of_utterance>", "<|fim_pad|>",   "<|repo_name|>",
    "<|file_sep|>", "<eos>",      "<turn|>",         "<|tool_response>",
};

uint64_t PairKey(int32_t l, int32_t r) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
}

}  // namespace

Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(VocabSpec spec) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->spec_ = std::move(spec);
  MEMRA_RETURN_IF_ERROR(t->Init());
  return t;
}

absl::Status Tokenizer::Init() {
  VocabSpec& s = spec_;
  const size_t n = s.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer: empty vocabulary");
  if (n > (1u << 30)) return absl::InvalidArgumentError("tokenizer: vocabulary too large");
  if (s.types.empty()) s.types.assign(n, TokenType::kNormal);
  if (s.scores.empty()) s.scores.assign(n, 0.0f);
  if (s.types.size() != n)
    return absl::InvalidArgumentError(absl::StrFormat("tokenizer: %d token types for %d tokens", s.types.size(), n));
  if (s.scores.size() != n)
    return absl::InvalidArgumentError(absl::StrFormat("tokenizer: %d scores for %d tokens", s.scores.size(), n));
  for (auto [name, id] : {std::pair<const char*, int32_t>{"bos", s.bos_id},
                          {"eos", s.eos_id},
                          {"eot", s.eot_id},
                          {"pad", s.pad_id},
                          {"unknown", s.unk_id}}) {
    if (id < -1 || id >= static_cast<int64_t>(n))
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer: %s token id %d outside the vocabulary [0, %d)", name, id, n));
  }
  if (s.add_bos && s.bos_id < 0) return absl::InvalidArgumentError("tokenizer: add_bos set but no bos token id");
  if (s.add_eos && s.eos_id < 0) return absl::InvalidArgumentError("tokenizer: add_eos set but no eos token id");
  for (size_t i = 0; i < n; ++i) {
    const int32_t ty = static_cast<int32_t>(s.types[i]);
    if (ty < 0 || ty > 6)
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer: token %d (\"%s\") has unknown type %d", i, absl::CHexEscape(s.tokens[i]), ty));
  }

  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) token_to_id_.try_emplace(s.tokens[i], static_cast<int32_t>(i));

  // Added tokens matched in text: CONTROL, USER_DEFINED, UNKNOWN (llama.cpp's special cache).
  for (size_t i = 0; i < n; ++i) {
    const TokenType ty = s.types[i];
    if (ty != TokenType::kControl && ty != TokenType::kUserDefined && ty != TokenType::kUnknown) continue;
    special_.Add(s.tokens[i], static_cast<int32_t>(i));
  }

  // End of generation.
  is_eog_.assign(n, false);
  auto add_eog = [&](int32_t id) {
    if (id >= 0 && !is_eog_[id]) {
      is_eog_[id] = true;
      eog_ids_.push_back(id);
    }
  };
  add_eog(s.eos_id);
  add_eog(s.eot_id);
  for (absl::string_view text : kEogTexts) {
    auto it = token_to_id_.find(text);
    if (it != token_to_id_.end()) add_eog(it->second);
  }

  switch (s.model) {
    case ModelType::kGpt2:
      return InitBpe();
    case ModelType::kLlama:
      return InitSpm();
    case ModelType::kGemma4:
      return InitGemma4();
  }
  return absl::InternalError("tokenizer: bad model type");
}

absl::Status Tokenizer::InitBpe() {
  const VocabSpec& s = spec_;
  normalize_nfc_ = s.normalize_nfc.value_or(s.pre == "qwen2" || s.pre == "qwen35");
  add_space_prefix_ = false;

  const std::vector<char32_t> b2u = ByteToUnicodeTable();
  std::vector<int16_t> u2b(512, -1);  // the table maps into [0, 0x144)
  for (int b = 0; b < 256; ++b) {
    u2b[b2u[b]] = static_cast<int16_t>(b);
    auto it = token_to_id_.find(EncodeUtf8(b2u[b]));
    if (it == token_to_id_.end())
      return absl::InvalidArgumentError(absl::StrFormat(
          "tokenizer: byte-level BPE vocabulary has no token for byte 0x%02X (\"%s\")", b, EncodeUtf8(b2u[b])));
    byte_token_[b] = it->second;
  }
  std::fill(std::begin(spm_byte_token_), std::end(spm_byte_token_), -1);

  // Pieces: NORMAL tokens are byte-level encoded; the others stand for their own text.
  pieces_.resize(s.tokens.size());
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const std::string& text = s.tokens[i];
    if (s.types[i] != TokenType::kNormal && s.types[i] != TokenType::kUndefined) {
      pieces_[i] = s.types[i] == TokenType::kUnused ? "" : text;
      continue;
    }
    std::string bytes;
    bytes.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      size_t len;
      bool valid;
      const char32_t cp = DecodeUtf8(text, pos, &len, &valid);
      if (valid && cp < u2b.size() && u2b[cp] >= 0) {
        bytes.push_back(static_cast<char>(u2b[cp]));
      } else {
        bytes.append(text, pos, len);  // not a byte-level character: keep as is
      }
      pos += len;
    }
    pieces_[i] = std::move(bytes);
  }

  MEMRA_RETURN_IF_ERROR(LoadMerges());

  std::optional<std::string> pattern = PrePattern(s.pre);
  if (!pattern)
    return absl::UnimplementedError(absl::StrCat("tokenizer: unsupported pre-tokenizer \"", s.pre,
                                                 "\" (supported: qwen2, qwen35, llama3/llama-bpe, gpt2/default)"));
  UErrorCode status = U_ZERO_ERROR;
  UParseError perr;
  pre_regex_.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(*pattern), 0, perr, status));
  if (U_FAILURE(status) || !pre_regex_)
    return absl::InternalError(
        absl::StrCat("tokenizer: ICU cannot compile the ", s.pre, " pre-tokenizer regex: ", u_errorName(status)));
  if (normalize_nfc_) {
    status = U_ZERO_ERROR;
    nfc_ = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status) || !nfc_)
      return absl::InternalError(absl::StrCat("tokenizer: ICU NFC normalizer unavailable: ", u_errorName(status)));
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::LoadMerges() {
  const VocabSpec& s = spec_;
  merges_.reserve(s.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < s.merges.size(); ++rank) {
    const std::string& m = s.merges[rank];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos)
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer: merge %d (\"%s\") is not \"left right\"", rank, absl::CHexEscape(m)));
    absl::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
    auto l = token_to_id_.find(left);
    auto r = token_to_id_.find(right);
    joined.assign(left.data(), left.size());
    joined.append(right.data(), right.size());
    auto merged = token_to_id_.find(joined);
    // HF refuses merges whose parts are not in the vocabulary; skip them the same way.
    if (l == token_to_id_.end() || r == token_to_id_.end() || merged == token_to_id_.end()) continue;
    merges_.try_emplace(PairKey(l->second, r->second), std::make_pair(static_cast<int32_t>(rank), merged->second));
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::InitSpm() {
  const VocabSpec& s = spec_;
  add_space_prefix_ = s.add_space_prefix.value_or(true);
  normalize_nfc_ = false;
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  pieces_.resize(s.tokens.size());
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const std::string& text = s.tokens[i];
    switch (s.types[i]) {
      case TokenType::kByte:
        break;  // LoadByteTokens
      case TokenType::kNormal:
      case TokenType::kUndefined:
        pieces_[i] = text;  // U+2581 -> space is applied on output
        break;
      case TokenType::kUnknown:
        pieces_[i] = "\xE2\x96\x85";  // llama.cpp renders UNKNOWN as U+2585
        break;
      case TokenType::kUnused:
        pieces_[i] = "";
        break;
      default:
        pieces_[i] = text;
        break;
    }
  }
  return LoadByteTokens();
}

absl::Status Tokenizer::LoadByteTokens() {
  std::fill(std::begin(spm_byte_token_), std::end(spm_byte_token_), -1);
  for (size_t i = 0; i < spec_.tokens.size(); ++i) {
    if (spec_.types[i] != TokenType::kByte) continue;
    const std::string& text = spec_.tokens[i];
    // "<0xAB>"
    int v = -1;
    if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
      };
      const int hi = hex(text[3]), lo = hex(text[4]);
      if (hi >= 0 && lo >= 0) v = hi * 16 + lo;
    }
    if (v < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer: BYTE token %d has text \"%s\", expected <0xXX>", i, absl::CHexEscape(text)));
    if (spm_byte_token_[v] < 0) spm_byte_token_[v] = static_cast<int32_t>(i);
    pieces_[i] = std::string(1, static_cast<char>(v));
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::InitGemma4() {
  const VocabSpec& s = spec_;
  add_space_prefix_ = false;
  normalize_nfc_ = false;
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  // Pieces as llama.cpp's token_to_piece renders them: U+2581 in a NORMAL token is a space.
  pieces_.resize(s.tokens.size());
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    switch (s.types[i]) {
      case TokenType::kNormal:
      case TokenType::kUndefined:
        pieces_[i] = absl::StrReplaceAll(s.tokens[i], {{kSpmSpace, " "}});
        break;
      case TokenType::kUnused:
        pieces_[i] = "";
        break;
      default:
        pieces_[i] = s.tokens[i];
        break;
    }
  }
  MEMRA_RETURN_IF_ERROR(LoadByteTokens());
  return LoadMerges();
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return IsValidId(id) ? spec_.tokens[id] : kEmpty;
}

TokenType Tokenizer::token_type(int32_t id) const { return IsValidId(id) ? spec_.types[id] : TokenType::kUndefined; }

std::optional<int32_t> Tokenizer::FindToken(absl::string_view text) const {
  auto it = token_to_id_.find(text);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::IsEog(int32_t id) const { return IsValidId(id) && is_eog_[id]; }

// --- encoding ---

std::vector<std::string> Tokenizer::ControlTexts() const {
  std::vector<std::string> texts;
  for (const auto& [text, id] : special_.entries())
    if (spec_.types[id] != TokenType::kUserDefined) texts.emplace_back(text);
  std::sort(texts.begin(), texts.end());
  return texts;
}

void Tokenizer::SplitSpecial(absl::string_view text, bool parse_special, absl::Span<const TextRange> literal,
                             std::vector<Fragment>* out) const {
  size_t start = 0;  // start of the pending text run
  size_t pos = 0;
  size_t next_literal = 0;  // the first literal range not wholly before pos
  while (pos < text.size()) {
    while (next_literal < literal.size() && literal[next_literal].end <= pos) ++next_literal;
    const auto found = special_.At(text, pos, [&](int32_t id, size_t len) {
      if (spec_.types[id] == TokenType::kUserDefined) return true;
      // A control token only where they are parsed, and not overlapping a literal range (a message's text).
      return parse_special && !(next_literal < literal.size() && literal[next_literal].begin < pos + len);
    });
    if (found) {
      if (pos > start) out->push_back({false, -1, text.substr(start, pos - start)});
      out->push_back({true, found->value, text.substr(pos, found->length)});
      pos += found->length;
      start = pos;
      continue;
    }
    ++pos;
  }
  if (start < text.size()) out->push_back({false, -1, text.substr(start)});
}

std::vector<int32_t> Tokenizer::Encode(absl::string_view input, const EncodeOptions& opts) const {
  std::string sanitized;
  absl::string_view text = input;
  if (!IsValidUtf8(input)) {
    sanitized = SanitizeUtf8(input);
    text = sanitized;
  }
  std::vector<Fragment> fragments;
  // Sanitizing replaces bytes, so byte ranges of the input no longer hold: then none are used
  // (chat prompts are valid UTF-8; ChatTemplate::Render sanitizes before it records ranges).
  SplitSpecial(text, opts.parse_special, sanitized.empty() ? opts.literal_ranges : absl::Span<const TextRange>(),
               &fragments);

  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (opts.add_special && spec_.add_bos) out.push_back(spec_.bos_id);

  if (spec_.model == ModelType::kGpt2) {
    std::string normalized;
    for (const Fragment& f : fragments) {
      if (f.is_token) {
        out.push_back(f.id);
        continue;
      }
      absl::string_view seg = f.text;
      if (nfc_) {
        UErrorCode status = U_ZERO_ERROR;
        icu::StringPiece sp(seg.data(), static_cast<int32_t>(seg.size()));
        if (seg.size() < (1u << 30) && !nfc_->isNormalizedUTF8(sp, status) && U_SUCCESS(status)) {
          normalized.clear();
          icu::StringByteSink<std::string> sink(&normalized);
          status = U_ZERO_ERROR;
          nfc_->normalizeUTF8(0, sp, sink, nullptr, status);
          if (U_SUCCESS(status)) seg = normalized;
        }
      }
      EncodeBpeText(seg, &out);
    }
  } else if (spec_.model == ModelType::kGemma4) {
    std::string escaped;
    for (const Fragment& f : fragments) {
      if (f.is_token) {
        out.push_back(f.id);
        continue;
      }
      escaped = absl::StrReplaceAll(f.text, {{" ", kSpmSpace}});
      EncodeGemma4Text(escaped, &out);
    }
  } else {
    bool prev_special = opts.space_prefix;  // llama.cpp: a space prefix at the start and after added tokens
    for (const Fragment& f : fragments) {
      if (f.is_token) {
        out.push_back(f.id);
        prev_special = true;
        continue;
      }
      std::string t;
      t.reserve(f.text.size() * 2 + 3);
      if (add_space_prefix_ && prev_special) t.append(kSpmSpace.data(), kSpmSpace.size());
      for (char c : f.text) {
        if (c == ' ')
          t.append(kSpmSpace.data(), kSpmSpace.size());
        else
          t.push_back(c);
      }
      EncodeSpmText(t, &out);
      prev_special = false;
    }
  }
  if (opts.add_special && spec_.add_eos) out.push_back(spec_.eos_id);
  return out;
}

std::vector<std::string> Tokenizer::PreTokenize(absl::string_view text) const {
  std::vector<std::string> words;
  for (absl::string_view w : PreTokenizeViews(text)) words.emplace_back(w);
  return words;
}

std::vector<absl::string_view> Tokenizer::PreTokenizeViews(absl::string_view text) const {
  std::vector<absl::string_view> words;
  if (!pre_regex_ || text.empty()) {
    if (!text.empty()) words.push_back(text);
    return words;
  }
  if (text.size() > static_cast<size_t>(INT32_MAX) / 2) {  // beyond ICU's int32 indexing
    words.push_back(text);
    return words;
  }
  const icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(pre_regex_->matcher(u, status));
  if (U_FAILURE(status) || !m) {
    words.push_back(text);
    return words;
  }
  // Walk UTF-16 offsets and UTF-8 offsets together (matches come in order).
  int32_t u16 = 0;
  size_t u8 = 0;
  auto advance_to = [&](int32_t target) {
    while (u16 < target) {
      const UChar32 c = u.char32At(u16);
      u16 += U16_LENGTH(c);
      u8 += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    return u8;
  };
  size_t last_end8 = 0;
  while (true) {
    status = U_ZERO_ERROR;
    if (!m->find(status) || U_FAILURE(status)) break;
    const int32_t s16 = m->start(status), e16 = m->end(status);
    if (U_FAILURE(status) || e16 <= s16) break;
    const size_t s8 = advance_to(s16);
    if (s8 > last_end8) words.push_back(text.substr(last_end8, s8 - last_end8));  // gap
    const size_t e8 = advance_to(e16);
    words.push_back(text.substr(s8, e8 - s8));
    last_end8 = e8;
  }
  // Whatever the regex did not cover (a gap at the end, or the rest after a regex failure such
  // as ICU's backtracking limit) is one more piece.
  if (last_end8 < text.size()) words.push_back(text.substr(last_end8));
  return words;
}

void Tokenizer::EncodeBpeText(absl::string_view text, std::vector<int32_t>* out) const {
  // Words repeat a lot in long prompts: remember the ids of short ones for this call (HF's BPE
  // keeps a cache too). Keys point into `text`, which outlives the map.
  constexpr size_t kMaxCachedWordBytes = 48;
  constexpr size_t kMaxCacheEntries = 1 << 16;
  absl::flat_hash_map<absl::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> cached_ids;
  for (absl::string_view word : PreTokenizeViews(text)) {
    if (word.size() > kMaxCachedWordBytes) {
      BpeWord(word, out);
      continue;
    }
    auto it = cache.find(word);
    if (it != cache.end()) {
      out->insert(out->end(), cached_ids.begin() + it->second.first,
                  cached_ids.begin() + it->second.first + it->second.second);
      continue;
    }
    const size_t before = out->size();
    BpeWord(word, out);
    if (cache.size() < kMaxCacheEntries) {
      const uint32_t start = static_cast<uint32_t>(cached_ids.size());
      cached_ids.insert(cached_ids.end(), out->begin() + before, out->end());
      cache.emplace(word, std::make_pair(start, static_cast<uint32_t>(out->size() - before)));
    }
  }
}

void Tokenizer::BpeWord(absl::string_view word, std::vector<int32_t>* out) const {
  const size_t n = word.size();
  if (n == 0) return;
  if (n == 1) {
    out->push_back(byte_token_[static_cast<uint8_t>(word[0])]);
    return;
  }
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = byte_token_[static_cast<uint8_t>(word[i])];
  for (int32_t p : MergeByRank(ids)) out->push_back(ids[p]);
}

std::vector<int32_t> Tokenizer::MergeByRank(std::vector<int32_t>& ids) const {
  // Symbols in a doubly linked list; a min-heap of (rank, position) picks the next merge (lowest
  // rank, leftmost on ties), as HF's BPE::merge_all and llama.cpp's bigram queue do. O(n log n).
  const int32_t n = static_cast<int32_t>(ids.size());
  std::vector<int32_t> next(n);
  std::vector<int32_t> prev(n);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int32_t pos;
    int32_t left_id, right_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto try_push = [&](int32_t pos) {
    if (pos < 0) return;
    const int32_t nx = next[pos];
    if (nx < 0 || ids[pos] < 0 || ids[nx] < 0) return;
    auto it = merges_.find(PairKey(ids[pos], ids[nx]));
    if (it != merges_.end()) heap.push({it->second.first, pos, ids[pos], ids[nx]});
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int32_t right = next[c.pos];
    if (ids[c.pos] != c.left_id || right < 0 || ids[right] != c.right_id) continue;
    ids[c.pos] = merges_.find(PairKey(c.left_id, c.right_id))->second.second;
    const int32_t after = next[right];
    ids[right] = -2;  // merged away (never a live symbol again: no pair has id -2)
    next[c.pos] = after;
    if (after >= 0) prev[after] = c.pos;
    try_push(prev[c.pos]);
    try_push(c.pos);
  }
  std::vector<int32_t> left;
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) left.push_back(i);
  return left;
}

void Tokenizer::EncodeGemma4Text(absl::string_view text, std::vector<int32_t>* out) const {
  // llama.cpp's gemma4 pre-tokenizer: runs of newlines and runs of everything else.
  for (size_t i = 0; i < text.size();) {
    const bool newlines = text[i] == '\n';
    size_t j = i;
    while (j < text.size() && (text[j] == '\n') == newlines) ++j;
    const absl::string_view word = text.substr(i, j - i);
    i = j;
    if (newlines) {
      if (std::optional<int32_t> id = FindToken(word)) {
        out->push_back(*id);
        continue;
      }
    }
    Gemma4Word(word, out);
  }
}

void Tokenizer::Gemma4Word(absl::string_view word, std::vector<int32_t>* out) const {
  // Symbols are UTF-8 characters; a character that is not a token never merges and is spelled in
  // byte tokens at the end (skipped where the vocabulary lacks the byte, as llama.cpp does).
  std::vector<int32_t> ids;
  std::vector<absl::string_view> chars;
  ids.reserve(word.size());
  chars.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {
    size_t len;
    DecodeUtf8(word, pos, &len);
    chars.push_back(word.substr(pos, len));
    ids.push_back(FindToken(chars.back()).value_or(-1));
    pos += len;
  }
  for (int32_t p : MergeByRank(ids)) {
    if (ids[p] >= 0) {
      out->push_back(ids[p]);
      continue;
    }
    for (char c : chars[p]) {
      const int32_t bt = spm_byte_token_[static_cast<uint8_t>(c)];
      if (bt >= 0) out->push_back(bt);
    }
  }
}

void Tokenizer::EncodeSpmText(absl::string_view text, std::vector<int32_t>* out) const {
  // llama.cpp's llm_tokenizer_spm_session: UTF-8 characters as symbols, bigrams whose text is a
  // vocabulary piece merged by score (highest first, leftmost on ties), then every final symbol
  // that is not a piece spelled in byte tokens.
  struct Sym {
    int32_t prev, next;
    size_t start, len;
  };
  std::vector<Sym> syms;
  syms.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t len;
    DecodeUtf8(text, pos, &len);
    syms.push_back({static_cast<int32_t>(syms.size()) - 1, -1, pos, len});
    pos += len;
  }
  for (size_t i = 0; i + 1 < syms.size(); ++i) syms[i].next = static_cast<int32_t>(i + 1);
  struct Bigram {
    float score;
    int32_t left, right;
    size_t size;
    bool operator<(const Bigram& o) const {  // max-heap: higher score, then lower left
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Bigram> heap;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    absl::string_view piece = text.substr(syms[l].start, syms[l].len + syms[r].len);
    auto it = token_to_id_.find(piece);
    if (it == token_to_id_.end()) return;
    heap.push({spec_.scores[it->second], l, r, piece.size()});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i) - 1, static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Bigram b = heap.top();
    heap.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  // Every final symbol is a piece (merged bigrams always are) or a single character, spelled in
  // byte tokens when it is not in the vocabulary (llama.cpp's resegment: its reverse-merge
  // branch cannot trigger, since only vocabulary pieces are ever merged).
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    absl::string_view piece = text.substr(syms[i].start, syms[i].len);
    auto it = token_to_id_.find(piece);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      continue;
    }
    for (char c : piece) {
      int32_t bt = spm_byte_token_[static_cast<uint8_t>(c)];
      if (bt < 0) {
        auto single = token_to_id_.find(absl::string_view(&c, 1));
        bt = single != token_to_id_.end() ? single->second : spec_.unk_id;
      }
      if (bt >= 0) out->push_back(bt);
    }
  }
}

// --- decoding ---

absl::string_view Tokenizer::RawPiece(int32_t id, bool render_special) const {
  if (!IsValidId(id)) return {};
  const TokenType ty = spec_.types[id];
  if (!render_special && (ty == TokenType::kControl || ty == TokenType::kUnknown)) return {};
  return pieces_[id];
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  std::string s(RawPiece(id, render_special));
  if (spec_.model == ModelType::kLlama && token_type(id) == TokenType::kNormal)
    s = absl::StrReplaceAll(s, {{kSpmSpace, " "}});
  return s;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids, const DecodeOptions& opts) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!IsValidId(ids[i]))
      return absl::InvalidArgumentError(
          absl::StrFormat("decode: token id %d at index %d is outside the vocabulary [0, %d)", ids[i], i, n_vocab()));
    {
      absl::string_view p = RawPiece(ids[i], opts.render_special);
      out.append(p.data(), p.size());
    }
  }
  if (spec_.model == ModelType::kLlama) {
    out = absl::StrReplaceAll(out, {{kSpmSpace, " "}});
    if (add_space_prefix_ && opts.strip_space_prefix && !out.empty() && out[0] == ' ') out.erase(0, 1);
  }
  return out;
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions opts) : tok_(tokenizer), opts_(opts) {}

void StreamingDecoder::Reset() {
  pending_.clear();
  at_start_ = true;
}

std::string StreamingDecoder::Emit(absl::string_view bytes) {
  std::string s = SanitizeUtf8(bytes);
  if (tok_.model() == ModelType::kLlama) {
    s = absl::StrReplaceAll(s, {{kSpmSpace, " "}});
    if (at_start_ && tok_.add_space_prefix() && opts_.strip_space_prefix && !s.empty() && s[0] == ' ') s.erase(0, 1);
  }
  if (!bytes.empty()) at_start_ = false;
  return s;
}

absl::StatusOr<std::string> StreamingDecoder::Push(int32_t id) {
  if (!tok_.IsValidId(id))
    return absl::InvalidArgumentError(
        absl::StrFormat("decode: token id %d is outside the vocabulary [0, %d)", id, tok_.n_vocab()));
  absl::string_view piece = tok_.RawPiece(id, opts_.render_special);
  pending_.append(piece.data(), piece.size());
  const size_t cut = CompleteUtf8Prefix(pending_);
  if (cut == 0) return std::string();
  std::string out = Emit(absl::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  return out;
}

std::string StreamingDecoder::Flush() {
  std::string out = Emit(pending_);
  pending_.clear();
  return out;
}

}  // namespace memra::tokenizer
