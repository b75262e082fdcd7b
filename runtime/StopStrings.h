// Stop strings on streamed text (llama-server's and vLLM's rule): the text before the first
// occurrence of any stop string is emitted, the stop string and everything after it are not.
// While the end of the text could still become a stop string, that tail is held back, so no
// emitted text ever has to be taken back.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace memra::runtime {

class StopStringFilter {
 public:
  // Empty strings never match (the scheduler refuses them before this).
  explicit StopStringFilter(std::vector<std::string> stops);

  struct Result {
    std::string emit;      // text safe to stream now
    bool stopped = false;  // a stop string completed; nothing more is emitted
  };
  // Appends the next piece of text.
  Result Push(absl::string_view piece);
  // The held-back tail at the end of the sequence (it never became a stop string).
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text received but not emitted
};

}  // namespace memra::runtime
