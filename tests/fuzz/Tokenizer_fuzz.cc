// libFuzzer target for frontends/tokenizer: arbitrary bytes through the Qwen3 byte-level BPE
// (tests/data/tokenizer/qwen3-vocab.gguf), an SPM byte-fallback vocabulary, the streaming decoder
// and the Jinja chat-template engine. Nothing may crash, hang or read out of bounds, and:
//  * every id is in the vocabulary;
//  * decode(encode(x)) is a fixed point: encoding and decoding it again gives it back;
//  * the streaming decoder's output is valid UTF-8 and equals the sanitized batch decode;
//  * the chat prompts' control-text guard gives any text back byte for byte, its ranges in bounds,
//    ascending, each a control text, and no control token is read inside a literal range.
// The first input byte picks the mode. MEMRA_TOKENIZER_GGUF overrides the vocabulary path.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/ControlTextGuard.h"
#include "frontends/tokenizer/Jinja.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "frontends/tokenizer/Utf8.h"

#ifndef MEMRA_TEST_DATA_DIR
#define MEMRA_TEST_DATA_DIR "tests/data"
#endif

namespace {

using namespace memra::tokenizer;

void Check(bool cond) {
  if (!cond) __builtin_trap();
}

Tokenizer* g_qwen = nullptr;
Tokenizer* g_spm = nullptr;

std::unique_ptr<Tokenizer> MakeSpm() {
  VocabSpec s;
  s.model = ModelType::kLlama;
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.types.push_back(TokenType::kByte);
  }
  // A few pieces so that merges happen.
  for (const char* p : {"\xE2\x96\x81"
                        "the",
                        "th", "he",
                        "\xE2\x96\x81"
                        "t",
                        "ab", "abc", "e"}) {
    s.tokens.push_back(p);
    s.types.push_back(TokenType::kNormal);
  }
  s.scores.assign(s.tokens.size(), 0.0f);
  for (size_t i = 259; i < s.tokens.size(); ++i) s.scores[i] = -static_cast<float>(i);
  s.bos_id = 1;
  s.eos_id = 2;
  s.unk_id = 0;
  s.add_bos = true;
  return *Tokenizer::Create(s);
}

void RoundTrip(const Tokenizer& tok, const std::string& input, bool parse_special) {
  EncodeOptions eo;
  eo.add_special = false;
  eo.parse_special = parse_special;
  const std::vector<int32_t> ids = tok.Encode(input, eo);
  for (int32_t id : ids) Check(tok.IsValidId(id));
  auto d1 = tok.Decode(ids);
  Check(d1.ok());
  // Byte-level BPE: the decoded text is a fixed point. (SPM is lossy around spaces/U+2581.)
  if (tok.model() == ModelType::kGpt2) {
    auto d2 = tok.Decode(tok.Encode(*d1, eo));
    Check(d2.ok() && *d2 == *d1);
  }
  StreamingDecoder sd(tok);
  std::string streamed;
  for (int32_t id : ids) {
    auto chunk = sd.Push(id);
    Check(chunk.ok());
    Check(IsValidUtf8(*chunk));
    streamed += *chunk;
  }
  streamed += sd.Flush();
  Check(IsValidUtf8(streamed));
  if (tok.model() == ModelType::kGpt2) Check(streamed == SanitizeUtf8(*d1));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string path = MEMRA_TEST_DATA_DIR "/tokenizer/qwen3-vocab.gguf";
  auto file = memra::gguf::GgufFile::Open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "Tokenizer_fuzz: cannot open %s\n", path.c_str());
    std::abort();
  }
  g_qwen = Tokenizer::FromGguf(**file)->release();
  g_spm = MakeSpm().release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 6;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode) {
    case 0:
      RoundTrip(*g_qwen, input, true);
      break;
    case 1:
      RoundTrip(*g_qwen, input, false);
      break;
    case 2:
      RoundTrip(*g_spm, input, data[0] & 8);
      break;
    case 3: {  // arbitrary ids through both decoders
      for (const Tokenizer* tok : {g_qwen, g_spm}) {
        StreamingDecoder sd(*tok);
        for (size_t i = 0; i + 4 <= input.size(); i += 4) {
          int32_t id;
          std::memcpy(&id, input.data() + i, 4);
          auto chunk = sd.Push(id);
          Check(chunk.ok() == tok->IsValidId(id));
          if (chunk.ok()) Check(IsValidUtf8(*chunk));
          (void)tok->TokenToPiece(id, data[0] & 8);
        }
        Check(IsValidUtf8(sd.Flush()));
      }
      break;
    }
    case 4: {  // the input as a chat template
      jinja::Options opts;
      opts.max_steps = 200000;
      opts.max_output_bytes = 1 << 20;
      auto t = jinja::Template::Parse(input, opts);
      if (!t.ok()) break;
      auto vars = Json::Parse(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},)"
                              R"( {"role": "assistant", "content": "<think>r</think>A", "tool_calls": [{"name": "f",)"
                              R"( "arguments": {"x": [1, 2.5, null, true]}}]}], "add_generation_prompt": true,)"
                              R"( "tools": [{"type": "function", "function": {"name": "f"}}], "bos_token": "<s>"})");
      (void)(*t)->Render(*vars);
      break;
    }
    case 5: {  // the control-text guard of chat prompts (ControlTextGuard.h)
      static const ControlTextGuard* guard = new ControlTextGuard(g_qwen->ControlTexts());
      auto check_ranges = [](const std::string& text, const std::vector<TextRange>& ranges) {
        size_t last = 0;
        for (const TextRange& r : ranges) {
          Check(r.begin >= last && r.begin < r.end && r.end <= text.size());
          const std::string piece = text.substr(r.begin, r.end - r.begin);
          Check(piece == "\xEE\x80\x80" || g_qwen->FindToken(piece).has_value());
          last = r.end;
        }
      };
      std::vector<TextRange> ranges;
      const std::string back = guard->Restore(guard->GuardText(input), &ranges);
      Check(back == input);
      check_ranges(back, ranges);
      ranges.clear();
      check_ranges(guard->Restore(input, &ranges), ranges);  // arbitrary bytes as a render
      if (IsValidUtf8(input)) {
        const std::vector<TextRange> all = {{0, input.size()}};
        EncodeOptions eo;
        eo.add_special = false;
        eo.literal_ranges = all;
        for (int32_t id : g_qwen->Encode(input, eo)) Check(g_qwen->token_type(id) != TokenType::kControl);
      }
      break;
    }
  }
  return 0;
}
