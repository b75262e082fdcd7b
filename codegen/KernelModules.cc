#include "codegen/KernelModules.h"

#include <set>

#include "ir/Module.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOpRegistry.h"

namespace memra::codegen {

namespace kcu = memra::kernels::cuda;

const std::vector<int64_t>& BucketLadder() {
  static const std::vector<int64_t> ladder = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  return ladder;
}

int64_t TokenBucket(int64_t T) {
  if (T <= 1) return 1;
  for (int64_t b : BucketLadder())
    if (T <= b) return b;
  return (T + 4095) / 4096 * 4096;
}

absl::StatusOr<std::vector<kcu::ModuleSpec>> ModulesForFunction(const ir::Function& fn, int64_t bucket,
                                                                const kcu::Target& target, kcu::WeightMode weights) {
  const bool recorded = fn.module() != nullptr && fn.module()->attrs().Has("kernel_arch") && kcu::IsStaticFunction(fn);
  MEMRA_ASSIGN_OR_RETURN(std::vector<kcu::OpSelection> selections,
                         kcu::SelectionsOf(fn, bucket, target, weights, recorded));
  std::set<std::string> seen;
  std::vector<kcu::ModuleSpec> out;
  for (const kcu::OpSelection& s : selections)
    for (const kcu::Launch& l : s.launches)
      if (seen.insert(l.kernel.module.Key()).second) out.push_back(l.kernel.module);
  if (fn.name() == "decode") {
    auto greedy = kcu::GreedyNextLaunch(fn, target);
    if (greedy.ok() && seen.insert(greedy->kernel.module.Key()).second) out.push_back(greedy->kernel.module);
  }
  return out;
}

}  // namespace memra::codegen
