// Prompts for the tiny fixtures' byte tokenizer (byte b is id 3 + b, BOS 1), shared by the tests
// that run several sequences at once (the batched engine on the CPU and the GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memra::testing {

inline std::vector<int32_t> ByteTokenPrompt(const std::string& text) {
  std::vector<int32_t> ids = {1};
  for (unsigned char c : text) ids.push_back(3 + c);
  return ids;
}

// Eight prompts of 13..181 tokens: several span more than one 64-token chunk.
inline std::vector<std::vector<int32_t>> EightPrompts() {
  const std::string fox = "The quick brown fox jumps over the lazy dog. ";
  return {ByteTokenPrompt(fox + "12"),
          ByteTokenPrompt("Hello, world"),
          ByteTokenPrompt(fox + fox + fox + "and then?"),
          ByteTokenPrompt("0123456789abcdef"),
          ByteTokenPrompt(fox + fox + fox + fox),
          ByteTokenPrompt("Once upon a time"),
          ByteTokenPrompt(fox + "The end."),
          ByteTokenPrompt(fox + fox + "Why?")};
}

}  // namespace memra::testing
