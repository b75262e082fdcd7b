// Checks of option values shared by the subcommands: each error names the flag and its limit
// (the first piece of issue 12's validated options layer).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace memra::tools {

// --threads: 0 (all cores) up to the machine's hardware threads (more only slows the kernels
// down, and a huge count exhausts the thread limit).
absl::Status CheckThreads(int64_t threads, absl::string_view flag = "--threads");

}  // namespace memra::tools
