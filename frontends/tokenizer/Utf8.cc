#include "frontends/tokenizer/Utf8.h"

namespace memra::tokenizer {
namespace {

// Expected total length for a lead byte, 0 if it cannot start a sequence.
int SeqLen(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range of the second byte for a multi-byte lead (Unicode Table 3-7).
bool SecondOk(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

}  // namespace

char32_t DecodeUtf8(absl::string_view s, size_t pos, size_t* len, bool* valid) {
  const uint8_t lead = static_cast<uint8_t>(s[pos]);
  const int n = SeqLen(lead);
  if (valid) *valid = false;
  if (n == 1) {
    *len = 1;
    if (valid) *valid = true;
    return lead;
  }
  if (n == 0) {
    *len = 1;
    return kReplacementChar;
  }
  char32_t cp = lead & (0x7F >> n);
  for (int i = 1; i < n; ++i) {
    if (pos + i >= s.size()) {
      *len = i;
      return kReplacementChar;
    }
    const uint8_t b = static_cast<uint8_t>(s[pos + i]);
    const bool ok = i == 1 ? SecondOk(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *len = i;
      return kReplacementChar;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = n;
  if (valid) *valid = true;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(char32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

bool IsValidUtf8(absl::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t len;
    bool valid;
    DecodeUtf8(s, pos, &len, &valid);
    if (!valid) return false;
    pos += len;
  }
  return true;
}

std::string SanitizeUtf8(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len;
    bool valid;
    DecodeUtf8(s, pos, &len, &valid);
    if (valid) {
      out.append(s.data() + pos, len);
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    pos += len;
  }
  return out;
}

size_t CompleteUtf8Prefix(absl::string_view s) {
  // Look at the last (up to 3) bytes for the start of a sequence that is a valid but incomplete
  // prefix running to the end of `s`.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const uint8_t b = static_cast<uint8_t>(s[start]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: keep looking for the lead
    const int len = SeqLen(b);
    if (len <= 1 || static_cast<size_t>(len) <= back) return n;  // ASCII, invalid or complete
    // Incomplete: check that the bytes present are a valid prefix.
    for (size_t i = 1; i < back; ++i) {
      const uint8_t c = static_cast<uint8_t>(s[start + i]);
      const bool ok = i == 1 ? SecondOk(b, c) : (c >= 0x80 && c <= 0xBF);
      if (!ok) return n;
    }
    return start;
  }
  return n;
}

}  // namespace memra::tokenizer
