#include "frontends/synthetic/SyntheticVocab.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontends/gguf/GgufWriter.h"
#include "frontends/synthetic/SyntheticTensors.h"

namespace memra::synthetic {
namespace {

using gguf::Value;

constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

}  // namespace

void AddSyntheticVocab(uint32_t n_vocab, gguf::GgufWriter& w) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  if (n_vocab == 259) {
    // SentencePiece-style byte vocabulary, as in the shared fixtures: <unk>, <s>, </s>, <0x00>..<0xFF>.
    tokens = {"<unk>", "<s>", "</s>"};
    types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(absl::StrFormat("<0x%02X>", b));
      types.push_back(6);
    }
    scores.assign(tokens.size(), 0.0f);
    w.Set("tokenizer.ggml.model", Value::String("llama"));
    w.Set("tokenizer.ggml.tokens", Value::StringArray(tokens));
    w.Set("tokenizer.ggml.scores", Value::F32Array(scores));
    w.Set("tokenizer.ggml.token_type", Value::I32Array(types));
    w.Set("tokenizer.ggml.unknown_token_id", Value::U32(0));
    w.Set("tokenizer.ggml.bos_token_id", Value::U32(1));
    w.Set("tokenizer.ggml.eos_token_id", Value::U32(2));
    w.Set("tokenizer.ggml.add_bos_token", Value::Bool(true));
    w.Set("tokenizer.ggml.add_eos_token", Value::Bool(false));
    return;
  }
  // Byte-level BPE (gpt2 model, qwen2 pre-tokenizer) over the 256 byte symbols, Qwen's special
  // tokens, and reserved filler tokens up to the embedding size.
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(ByteLevelToken(b));
    types.push_back(1);
  }
  const uint32_t endoftext = tokens.size();
  for (const char* sp : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    tokens.push_back(sp);
    types.push_back(3);
  }
  while (tokens.size() < n_vocab) {
    tokens.push_back(absl::StrCat("<|reserved_", tokens.size(), "|>"));
    types.push_back(3);
  }
  w.Set("tokenizer.ggml.model", Value::String("gpt2"));
  w.Set("tokenizer.ggml.pre", Value::String("qwen2"));
  w.Set("tokenizer.ggml.tokens", Value::StringArray(tokens));
  w.Set("tokenizer.ggml.token_type", Value::I32Array(types));
  w.Set("tokenizer.ggml.merges", Value::StringArray({}));
  w.Set("tokenizer.ggml.eos_token_id", Value::U32(endoftext));
  w.Set("tokenizer.ggml.eot_token_id", Value::U32(endoftext + 2));
  w.Set("tokenizer.ggml.padding_token_id", Value::U32(endoftext));
  w.Set("tokenizer.ggml.bos_token_id", Value::U32(endoftext));
  w.Set("tokenizer.ggml.add_bos_token", Value::Bool(false));
  w.Set("tokenizer.chat_template", Value::String(kChatMlTemplate));
}

}  // namespace memra::synthetic
