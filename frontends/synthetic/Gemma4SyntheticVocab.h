// A Gemma 4-style vocabulary for synthetic `gemma4` models, written the way llama.cpp's converter
// writes Gemma 4's (tokenizer.ggml.model "gemma4": SentencePiece-style BPE over U+2581-escaped
// text with rank merges and <0xXX> byte fallback), with Gemma 4's special tokens and a chat
// template of its turn format (<|turn>role ... <turn|>, the thinking channel). The pieces come
// from BPE training over a few hundred common English words, so those words are single tokens and
// other text falls into plausible pieces; the rest of the vocabulary is unused filler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memra::gguf {
class GgufWriter;
}

namespace memra::synthetic {

struct Gemma4Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // llama_token_type
  std::vector<float> scores;
  std::vector<std::string> merges;  // "left right", rank order
};

// Ids of the special tokens (Gemma 4's for pad / eos / bos / unk / mask / <|turn> / <turn|>).
inline constexpr int32_t kGemma4Pad = 0, kGemma4Eos = 1, kGemma4Bos = 2, kGemma4Unk = 3, kGemma4Mask = 4;
inline constexpr int32_t kGemma4TurnOpen = 105, kGemma4TurnClose = 106;

// The vocabulary of exactly `n_vocab` tokens (>= 512: specials, bytes, characters; words as
// room allows).
Gemma4Vocab MakeGemma4Vocab(uint32_t n_vocab);

// The chat template written into synthetic gemma4 models (Gemma 4's turn format).
const char* Gemma4ChatTemplate();

// Writes tokenizer.ggml.* and tokenizer.chat_template for the vocabulary of `n_vocab` tokens.
void AddGemma4Tokenizer(uint32_t n_vocab, gguf::GgufWriter& w);

}  // namespace memra::synthetic
