// UTF-8 helpers for the tokenizer: decoding with the WHATWG / Unicode "maximal subpart" U+FFFD
// replacement policy (what Python's errors="replace" and TextDecoder do), encoding, and finding
// where a byte stream can be cut without splitting a character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace memra::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one code point at `s[pos]`. On success returns the code point and sets `*len` to its
// byte length (1..4). On an ill-formed sequence returns kReplacementChar with `*len` = the length
// of the maximal subpart to replace (>= 1), so that iterating replaces like WHATWG does.
// `*valid` (optional) tells the two apart (a literal U+FFFD in the text is valid).
char32_t DecodeUtf8(absl::string_view s, size_t pos, size_t* len, bool* valid = nullptr);

// Appends the UTF-8 encoding of `cp` (surrogates and values > U+10FFFF become U+FFFD).
void AppendUtf8(char32_t cp, std::string* out);
std::string EncodeUtf8(char32_t cp);

bool IsValidUtf8(absl::string_view s);

// `s` with every ill-formed sequence replaced by U+FFFD (maximal subparts, WHATWG).
std::string SanitizeUtf8(absl::string_view s);

// Length of the longest prefix of `s` that does not end inside a code point which is still
// incomplete but could be completed by more bytes (at most 3 bytes are held back). Ill-formed
// bytes are not held back.
size_t CompleteUtf8Prefix(absl::string_view s);

}  // namespace memra::tokenizer
