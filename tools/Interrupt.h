// Ctrl-C while a command generates: the first SIGINT sets a flag the command polls (it stops
// generating and prints what it has, e.g. the timings so far); a second one, before Rearm(),
// ends the process as usual (LLVM's signal handler runs the interrupt function once).
#pragma once

#include <atomic>

namespace memra::tools {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handler
  ~InterruptGuard();  // restores the default (Ctrl-C ends the process)
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // Not const: an interactive loop clears it after stopping a reply.
  std::atomic<bool>& flag();
  // Clears the flag and installs the handler again (an interactive loop, after stopping a reply).
  void Rearm();
};

}  // namespace memra::tools
