// Helpers of the CUDA test suites: data paths that also work from a copy of the repository
// elsewhere (the GPU machine runs the bundle from its repository root).
#pragma once

#include <string>

#include "tests/TestUtil.h"

namespace memra::testing {

// tests/data/<rel>: the configured source tree's, else ./tests/data/<rel> (cwd = repo root).
inline std::string CudaTestDataPath(const std::string& rel) {
  const std::string configured = TestDataPath(rel);
  if (FileExists(configured)) return configured;
  return "tests/data/" + rel;
}

}  // namespace memra::testing
