// libFuzzer target for the plan reader (a plan file is input too: `memra run` loads what
// `memra compile` or anyone else wrote). Any input must parse or fail with a message; what parses
// must serialize, re-parse and serialize identically, and loading its module (the IR parsed,
// verified and checked against the layout and the kernel table) must succeed or fail with a
// message, never crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/plan/Plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024 * 1024) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto plan = memra::runtime::ParsePlan(bytes, "fuzz.plan");
  if (!plan.ok()) {
    if (plan.status().message().empty()) std::abort();
    return 0;
  }
  const std::string written = memra::runtime::SerializePlan(*plan);
  auto again = memra::runtime::ParsePlan(written, "fuzz-rewritten.plan");
  if (!again.ok()) {
    std::fprintf(stderr, "a serialized plan does not parse: %s\n", std::string(again.status().message()).c_str());
    std::abort();
  }
  if (memra::runtime::SerializePlan(*again) != written) {
    std::fprintf(stderr, "parse -> serialize -> parse -> serialize differs\n");
    std::abort();
  }
  auto weights = memra::runtime::PlanWeights(*plan);
  if (!weights.ok() && weights.status().message().empty()) std::abort();
  auto module = memra::runtime::LoadPlanModule(*plan);
  if (!module.ok() && module.status().message().empty()) std::abort();
  return 0;
}
