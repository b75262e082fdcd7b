// Longest-match lookup of a fixed set of texts at a position of a string: the added tokens the
// tokenizer splits out of its input (llama.cpp's special-token cache) and the control texts
// ControlTextGuard hides in chat messages. A first-byte table skips positions no text starts at;
// then the texts' distinct lengths are tried longest first, each one hash lookup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace memra::tokenizer {

template <typename V>
class TextMatcher {
 public:
  struct Match {
    V value;
    size_t length;
  };

  // Adds `text` with `value`; false (and nothing changes) for an empty text or one already added,
  // whose first value stays. The matcher keeps `text` as a view: its bytes must outlive it.
  bool Add(absl::string_view text, V value) {
    if (text.empty() || !index_.try_emplace(text, value).second) return false;
    first_byte_[static_cast<uint8_t>(text[0])] = true;
    auto at = lengths_.begin();
    while (at != lengths_.end() && *at > text.size()) ++at;
    if (at == lengths_.end() || *at != text.size()) lengths_.insert(at, text.size());
    return true;
  }

  // The longest text at `pos` of `s` that `accept(value, length)` takes (longest first).
  template <typename Accept>
  std::optional<Match> At(absl::string_view s, size_t pos, Accept accept) const {
    if (pos >= s.size() || !first_byte_[static_cast<uint8_t>(s[pos])]) return std::nullopt;
    for (size_t len : lengths_) {
      if (len > s.size() - pos) continue;
      auto it = index_.find(s.substr(pos, len));
      if (it != index_.end() && accept(it->second, len)) return Match{it->second, len};
    }
    return std::nullopt;
  }
  std::optional<Match> At(absl::string_view s, size_t pos) const {
    return At(s, pos, [](const V&, size_t) { return true; });
  }

  // Every (text, value), in no particular order.
  const absl::flat_hash_map<absl::string_view, V>& entries() const { return index_; }

 private:
  absl::flat_hash_map<absl::string_view, V> index_;
  std::vector<size_t> lengths_;  // distinct lengths, longest first
  bool first_byte_[256] = {};
};

}  // namespace memra::tokenizer
