#include "tools/OptionChecks.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"

namespace memra::tools {

absl::Status CheckThreads(int64_t threads, absl::string_view flag) {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (threads < 0 || threads > cores)
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", threads, ": expected 0 (all cores) to ", cores,
                                                   " (the hardware threads of this machine)"));
  return absl::OkStatus();
}

}  // namespace memra::tools
