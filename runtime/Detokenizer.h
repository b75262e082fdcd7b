// Generated ids -> text, one token at a time, for the Scheduler's streaming and stop strings.
// Stateful, one per request: a tokenizer holds back the bytes of an incomplete UTF-8 sequence
// until the token that completes it, so a piece is never half a character.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace memra::tokenizer {
class Tokenizer;
}

namespace memra::runtime {

class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  // The text that became complete with token `id` (possibly empty).
  virtual std::string Push(int32_t id) = 0;
  // What is still held back at the end of the sequence.
  virtual std::string Flush() { return ""; }
};

// Makes one Detokenizer per request.
using DetokenizerFactory = std::function<std::unique_ptr<Detokenizer>()>;

// Each token's text is piece(id), emitted as is (no holding back).
DetokenizerFactory PieceDetokenizer(std::function<std::string(int32_t)> piece);

// tokenizer::StreamingDecoder as Session::Generate uses it (special tokens render as nothing, no
// space-prefix stripping). `tok` must outlive every Detokenizer made.
DetokenizerFactory TokenizerDetokenizer(const tokenizer::Tokenizer& tok);

}  // namespace memra::runtime
