#include "runtime/StopStrings.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"

namespace memra::runtime {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopStringFilter::Result StopStringFilter::Push(absl::string_view piece) {
  Result r;
  held_.append(piece.data(), piece.size());
  if (stops_.empty()) {
    r.emit = std::move(held_);
    held_.clear();
    return r;
  }
  // Only held_ needs searching: an occurrence starting in emitted text would have had its start
  // held back as a prefix of the stop string.
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    r.emit = held_.substr(0, first);
    r.stopped = true;
    held_.clear();
    return r;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k)
      if (absl::EndsWith(held_, absl::string_view(s).substr(0, k))) {
        hold = k;
        break;
      }
  r.emit = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return r;
}

std::string StopStringFilter::Flush() {
  std::string rest = std::move(held_);
  held_.clear();
  return rest;
}

}  // namespace memra::runtime
