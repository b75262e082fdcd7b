// Text <-> token ids for the models memra runs, built from a GGUF's `tokenizer.ggml.*` metadata
// (or an equivalent plain description, VocabSpec).
//
// Three model types:
//  * "gpt2": byte-level BPE (Qwen2/Qwen3/Qwen3.5, Llama 3, GPT-2). Text is split on added tokens
//    (CONTROL / USER_DEFINED, leftmost-longest), each remaining segment is NFC-normalized when the
//    model's HF tokenizer does (qwen2, qwen35), split by the pre-tokenizer regex (ICU), mapped
//    byte -> unicode (GPT-2 table) and merged by rank. Matches HF `tokenizers` (`ids_hf`).
//  * "llama": SentencePiece-style (llama.cpp's SPM): space -> U+2581, an added space prefix,
//    score-ordered merges of the vocabulary's pieces, byte fallback (<0xXX>) for the rest.
//  * "gemma4": SentencePiece-style BPE (llama.cpp's gemma4 vocabulary): space -> U+2581, no
//    space prefix, the text split only into newline runs and the rest, rank-ordered merges over
//    UTF-8 characters, byte fallback (<0xXX>); a newline run that is a token is that token. BOS
//    is always added (llama.cpp overrides add_bos_token for it).
//
// Invalid UTF-8 in the input is replaced by U+FFFD per maximal subpart (WHATWG / Python
// errors="replace"). Nothing here aborts or throws on any input. A Tokenizer is immutable after
// construction: Encode / Decode / TokenToPiece may be called from several threads at once.
// Cost: ~0.2 s to build the Qwen3 vocabulary (152k tokens, 151k merges), ~2M tokens/s encoding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "frontends/tokenizer/TextMatcher.h"

#include "unicode/uversion.h"

U_NAMESPACE_BEGIN
class Normalizer2;
class RegexPattern;
U_NAMESPACE_END

namespace memra::gguf {
class GgufFile;
}

namespace memra::tokenizer {

// llama.cpp's `llama_token_type` values as stored in `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class ModelType { kGpt2, kLlama, kGemma4 };

// Everything a tokenizer is made from (what the GGUF keys hold).
struct VocabSpec {
  ModelType model = ModelType::kGpt2;
  // Pre-tokenizer of gpt2 models: "qwen2", "qwen35", "llama3" / "llama-bpe", "gpt2" / "default".
  std::string pre = "qwen2";
  std::vector<std::string> tokens;
  std::vector<float> scores;        // SPM merge priorities; empty = all 0
  std::vector<TokenType> types;     // empty = all kNormal
  std::vector<std::string> merges;  // gpt2, gemma4: "left right" in rank order
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, pad_id = -1, unk_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  std::optional<bool> add_space_prefix;  // llama: default true (llama.cpp); gpt2: ignored
  std::optional<bool> normalize_nfc;     // default: true for pre qwen2 / qwen35 (HF normalizer NFC)
  std::string chat_template;             // Jinja source, may be empty
};

// Bytes [begin, end) of a text.
struct TextRange {
  size_t begin = 0, end = 0;
};

struct EncodeOptions {
  // Add BOS / EOS as the model's add_bos / add_eos flags say.
  bool add_special = true;
  // Match CONTROL (and UNKNOWN) token texts in the input, like llama.cpp's parse_special.
  // USER_DEFINED tokens are matched either way (as llama.cpp and HF do).
  bool parse_special = true;
  // SPM models with add_space_prefix: the space put before the first text fragment (llama.cpp
  // always puts it there). false when `text` continues text encoded before it (a chat turn's new
  // suffix), so the pieces' ids concatenate as the whole text's would; a fragment after a matched
  // special token still gets its space, as it would in the whole text.
  bool space_prefix = true;
  // Byte ranges of the input (ascending) where CONTROL / UNKNOWN token texts are text, not tokens,
  // even with parse_special: a chat prompt's spans that came from a message (ChatPrompt).
  absl::Span<const TextRange> literal_ranges;
};

struct DecodeOptions {
  // Render CONTROL / UNKNOWN tokens as their text; when false they produce nothing.
  // USER_DEFINED tokens always render; UNUSED ones never do.
  bool render_special = true;
  // llama models with add_space_prefix: drop the one space the encoder put in front of the text.
  bool strip_space_prefix = true;
};

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(VocabSpec spec);
  // From `tokenizer.ggml.{model,pre,tokens,token_type,merges,scores,bos_token_id,eos_token_id,
  // eot_token_id,padding_token_id,unknown_token_id,add_bos_token,add_eos_token,add_space_prefix}`
  // and `tokenizer.chat_template`. Errors name the key.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text (any bytes) -> ids. Never fails.
  std::vector<int32_t> Encode(absl::string_view text, const EncodeOptions& opts = {}) const;

  // Ids -> bytes: the concatenated pieces (byte-exact inverse of Encode for valid UTF-8 text; the
  // result can be invalid UTF-8 for arbitrary ids). Out-of-range ids are an error naming them.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, const DecodeOptions& opts = {}) const;
  // The bytes one token stands for ("" for out-of-range ids and hidden tokens). For llama
  // models U+2581 is shown as a space.
  std::string TokenToPiece(int32_t id, bool render_special = true) const;

  ModelType model() const { return spec_.model; }
  const std::string& pre() const { return spec_.pre; }
  int32_t n_vocab() const { return static_cast<int32_t>(spec_.tokens.size()); }
  bool IsValidId(int32_t id) const { return id >= 0 && id < n_vocab(); }
  // The vocabulary string (GPT-2 byte-to-unicode form for gpt2 models), "" if out of range.
  const std::string& TokenText(int32_t id) const;
  TokenType token_type(int32_t id) const;
  std::optional<int32_t> FindToken(absl::string_view text) const;
  // The texts matched as tokens only under EncodeOptions::parse_special (CONTROL, UNKNOWN).
  std::vector<std::string> ControlTexts() const;

  int32_t bos_id() const { return spec_.bos_id; }
  int32_t eos_id() const { return spec_.eos_id; }
  int32_t eot_id() const { return spec_.eot_id; }
  int32_t pad_id() const { return spec_.pad_id; }
  int32_t unk_id() const { return spec_.unk_id; }
  bool add_bos() const { return spec_.add_bos; }
  bool add_eos() const { return spec_.add_eos; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool normalize_nfc() const { return normalize_nfc_; }
  // End of generation: EOS, EOT, and tokens whose text is a known end marker (<|im_end|>,
  // <|endoftext|>, <|eot_id|>, <end_of_turn>, Gemma 4's <turn|> and <|tool_response>, ... as
  // llama.cpp's list, which matches the text whatever the token's type).
  bool IsEog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  const std::string& chat_template() const { return spec_.chat_template; }

  // --- pieces of the pipeline, exposed for tests and tools ---
  // The pre-tokenizer split of one text segment (gpt2 models; after NFC when enabled).
  std::vector<std::string> PreTokenize(absl::string_view text) const;
  // BPE of one pre-token (its raw bytes) appended to `out`.
  void BpeWord(absl::string_view word, std::vector<int32_t>* out) const;

 private:
  friend class StreamingDecoder;
  Tokenizer() = default;
  absl::Status Init();
  absl::Status InitBpe();
  absl::Status InitSpm();
  absl::Status InitGemma4();
  // The rank table from spec_.merges (merges whose parts or result are not tokens are skipped,
  // as HF does).
  absl::Status LoadMerges();
  // Pieces of BYTE tokens (<0xXX>) into pieces_ and spm_byte_token_.
  absl::Status LoadByteTokens();

  // A run of the input: text to tokenize, or an already-matched added token.
  struct Fragment {
    bool is_token;
    int32_t id;
    absl::string_view text;
  };
  void SplitSpecial(absl::string_view text, bool parse_special, absl::Span<const TextRange> literal,
                    std::vector<Fragment>* out) const;
  std::vector<absl::string_view> PreTokenizeViews(absl::string_view text) const;
  void EncodeBpeText(absl::string_view text, std::vector<int32_t>* out) const;
  void EncodeSpmText(absl::string_view text, std::vector<int32_t>* out) const;
  void EncodeGemma4Text(absl::string_view text, std::vector<int32_t>* out) const;
  void Gemma4Word(absl::string_view word, std::vector<int32_t>* out) const;
  // Rank-ordered BPE over symbol ids (-1: a symbol no merge applies to): merges in place and
  // returns the positions of the symbols left, in order.
  std::vector<int32_t> MergeByRank(std::vector<int32_t>& ids) const;
  // Piece bytes without the SPM whitespace handling.
  absl::string_view RawPiece(int32_t id, bool render_special) const;

  VocabSpec spec_;
  bool add_space_prefix_ = false;
  bool normalize_nfc_ = false;
  absl::flat_hash_map<absl::string_view, int32_t> token_to_id_;  // views into spec_.tokens
  std::vector<std::string> pieces_;                              // decoded bytes of each token (NORMAL/BYTE/USER...)
  std::vector<int32_t> eog_ids_;
  std::vector<bool> is_eog_;

  // Added tokens matched in text.
  TextMatcher<int32_t> special_;  // the added tokens matched in text, by id

  // gpt2
  int32_t byte_token_[256];                                            // id of the token for each single byte
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (l,r) -> (rank, id); gemma4 too
  std::unique_ptr<icu::RegexPattern> pre_regex_;
  const icu::Normalizer2* nfc_ = nullptr;

  // llama (SPM), gemma4
  int32_t spm_byte_token_[256];  // <0xXX> ids, -1 if absent
};

// Incremental detokenizer for streaming generation: Push returns only complete UTF-8 (a
// character split across tokens is held back until its last byte arrives); ill-formed bytes come
// out as U+FFFD, so the output is always valid UTF-8.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions opts = {});
  // Text that became complete with this token (possibly ""). Error for an out-of-range id.
  absl::StatusOr<std::string> Push(int32_t id);
  // What is still held back (an incomplete sequence, as U+FFFD); resets the pending bytes.
  std::string Flush();
  void Reset();

 private:
  std::string Emit(absl::string_view bytes);

  const Tokenizer& tok_;
  DecodeOptions opts_;
  std::string pending_;
  bool at_start_ = true;
};

}  // namespace memra::tokenizer
