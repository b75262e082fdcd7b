#include "runtime/PrefixCache.h"

#include <algorithm>

namespace memra::runtime {

namespace {

// splitmix64's finalizer: a full-avalanche mix of one word.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

PrefixCache::PrefixCache(int rows, int64_t grid) : grid_(std::max<int64_t>(grid, 1)), entries_(std::max(rows, 0)) {}

std::vector<uint64_t> PrefixCache::Chain(absl::Span<const int32_t> tokens, int64_t limit) const {
  const int64_t n = std::min<int64_t>(limit, static_cast<int64_t>(tokens.size())) / grid_;
  std::vector<uint64_t> out(n);
  uint64_t h = 0x6d656d7261ull;  // "memra"
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t i = k * grid_; i < (k + 1) * grid_; ++i) h = Mix(h ^ static_cast<uint32_t>(tokens[i]));
    out[k] = h;
  }
  return out;
}

PrefixCache::Hit PrefixCache::Lookup(absl::Span<const int32_t> tokens, int64_t limit) const {
  const std::vector<uint64_t> chain = Chain(tokens, limit);
  for (int64_t k = static_cast<int64_t>(chain.size()) - 1; k >= 0; --k) {
    auto it = at_.find(chain[k]);
    if (it == at_.end()) continue;
    const int64_t p = (k + 1) * grid_;
    for (int row : it->second) {
      const Entry& e = entries_[row];
      if (e.position == p && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) return {row, p};
    }
  }
  return {};
}

int64_t PrefixCache::KnownPrefix(absl::Span<const int32_t> tokens, int64_t limit) const {
  const std::vector<uint64_t> chain = Chain(tokens, limit);
  for (int64_t k = static_cast<int64_t>(chain.size()) - 1; k >= 0; --k)
    if (known_.contains(chain[k]) || seen_.contains(chain[k])) return (k + 1) * grid_;
  return 0;
}

void PrefixCache::Remember(absl::Span<const int32_t> tokens) {
  std::vector<uint64_t> chain = Chain(tokens, static_cast<int64_t>(tokens.size()));
  if (chain.empty()) return;
  for (uint64_t h : chain) ++seen_[h];
  remembered_.push_back(std::move(chain));
  if (static_cast<int>(remembered_.size()) <= kRememberedPrompts) return;
  for (uint64_t h : remembered_.front())
    if (auto it = seen_.find(h); it != seen_.end() && --it->second == 0) seen_.erase(it);
  remembered_.pop_front();
}

int PrefixCache::Find(absl::Span<const int32_t> tokens, int64_t position) const {
  if (position <= 0 || position % grid_ != 0 || position > static_cast<int64_t>(tokens.size())) return -1;
  const Hit hit = Lookup(tokens, position);
  return hit.position == position ? hit.row : -1;
}

void PrefixCache::Touch(int row) { entries_[row].last_use = ++clock_; }

int PrefixCache::FreeRow() const {
  for (int r = 0; r < rows(); ++r)
    if (entries_[r].serial == 0) return r;
  return -1;
}

int PrefixCache::LeastRecentlyUsed() const {
  int best = -1;
  for (int r = 0; r < rows(); ++r)
    if (entries_[r].serial != 0 && (best < 0 || entries_[r].last_use < entries_[best].last_use)) best = r;
  return best;
}

uint64_t PrefixCache::Set(int row, absl::Span<const int32_t> tokens, int64_t position) {
  Erase(row);
  Entry& e = entries_[row];
  e.serial = next_serial_++;
  e.position = position;
  e.tokens.assign(tokens.begin(), tokens.begin() + position);
  e.hashes = Chain(tokens, position);
  for (uint64_t h : e.hashes) ++known_[h];
  if (!e.hashes.empty()) at_[e.hashes.back()].push_back(row);
  ++used_;
  Touch(row);
  return e.serial;
}

void PrefixCache::Erase(int row) {
  Entry& e = entries_[row];
  if (e.serial == 0) return;
  for (uint64_t h : e.hashes)
    if (auto it = known_.find(h); it != known_.end() && --it->second == 0) known_.erase(it);
  if (!e.hashes.empty()) {
    auto it = at_.find(e.hashes.back());
    if (it != at_.end()) {
      std::vector<int>& rows = it->second;
      rows.erase(std::remove(rows.begin(), rows.end(), row), rows.end());
      if (rows.empty()) at_.erase(it);
    }
  }
  e = Entry{};
  --used_;
}

}  // namespace memra::runtime
