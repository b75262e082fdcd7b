#include "tools/Interrupt.h"

#include "llvm/Support/Signals.h"

namespace memra::tools {
namespace {

// Set from the signal handler: a lock-free atomic is async-signal-safe.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnInterrupt() { g_interrupted.store(true); }

}  // namespace

InterruptGuard::InterruptGuard() { Rearm(); }

InterruptGuard::~InterruptGuard() { llvm::sys::SetInterruptFunction(nullptr); }

std::atomic<bool>& InterruptGuard::flag() { return g_interrupted; }

void InterruptGuard::Rearm() {
  g_interrupted.store(false);
  llvm::sys::SetInterruptFunction(OnInterrupt);
}

}  // namespace memra::tools
