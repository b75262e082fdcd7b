#include "runtime/PrefillSchedule.h"

#include <algorithm>

namespace memra::runtime {

std::vector<TokenRange> FixedPrefillChunks(int64_t t, int64_t chunk, bool ring_on) {
  if (chunk <= 0 || t <= chunk) return {{0, t}};
  std::vector<TokenRange> out;
  int64_t start = 0;
  while (start < t) {
    int64_t end = std::min(start + chunk, t);
    const int64_t tail = t - end;
    if (tail > 0 && tail < kMinPrefillChunk) {
      if (ring_on)
        end = (t - kMinPrefillChunk > start) ? t - kMinPrefillChunk : t;
      else
        end = t;
    }
    out.emplace_back(start, end);
    start = end;
  }
  return out;
}

unsigned __int128 PrefillChunkWork(int64_t p, int64_t t) {
  const unsigned __int128 pp = static_cast<uint64_t>(p);
  return pp * (pp + 8 * static_cast<unsigned __int128>(static_cast<uint64_t>(t)));
}

std::vector<TokenRange> DynamicPrefillChunks(int64_t t, int64_t fill_chunk, const std::vector<TokenRange>& fixed) {
  const int64_t n = static_cast<int64_t>(fixed.size());
  if (n < 3) return fixed;
  const int64_t first = std::min(std::max((fill_chunk + 1) / 2, int64_t{64}), t - (n - 1) * kMinPrefillChunk);
  const unsigned __int128 fw = PrefillChunkWork(first, t);
  const unsigned __int128 span = PrefillChunkWork(t, t) - fw;
  const unsigned __int128 den = static_cast<unsigned __int128>(n - 1);
  std::vector<TokenRange> out;
  out.emplace_back(0, first);
  int64_t prev = first;
  for (int64_t b = 1; b < n - 1; ++b) {
    const unsigned __int128 target = fw * den + span * static_cast<unsigned __int128>(b);
    int64_t lo = prev + kMinPrefillChunk, hi = t - (n - 1 - b) * kMinPrefillChunk;
    // Smallest x in [lo, hi] with work(x) * den >= target (hi if none).
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (PrefillChunkWork(mid, t) * den >= target)
        hi = mid;
      else
        lo = mid + 1;
    }
    out.emplace_back(prev, lo);
    prev = lo;
  }
  out.emplace_back(prev, t);
  return out;
}

std::vector<TokenRange> AlignPrefillChunksToGrid(const std::vector<TokenRange>& ranges, int64_t t, int64_t c) {
  if (c == 0 || ranges.size() < 2) return ranges;
  std::vector<TokenRange> out;
  int64_t start = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const bool last = i + 1 == ranges.size();
    const int64_t e = last ? t : ranges[i].second / c * c;
    if (e > start) {
      out.emplace_back(start, e);
      start = e;
    }
  }
  return out;
}

}  // namespace memra::runtime
