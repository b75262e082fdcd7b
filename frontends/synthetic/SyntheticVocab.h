// The tokenizer of the qwen35 / qwen35moe / step35 synthetic models: with 259 tokens the shared
// fixtures' SentencePiece byte vocabulary (<unk>, <s>, </s>, <0x00>..<0xFF>); otherwise a
// byte-level BPE vocabulary (gpt2 model, qwen2 pre-tokenizer, as llama.cpp reads both) over the
// 256 byte symbols with ChatML's special tokens and a ChatML template, padded with reserved
// tokens to the embedding's row count.
#pragma once

#include <cstdint>

namespace memra::gguf {
class GgufWriter;
}

namespace memra::synthetic {

void AddSyntheticVocab(uint32_t n_vocab, gguf::GgufWriter& w);

}  // namespace memra::synthetic
