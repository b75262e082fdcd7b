// The other half of MoeGemmEmu.h beside MoeGemmEmuMain.cc (which includes memra's host headers;
// the emulation header redefines CUDA keywords): the registry the MoeGemmEmuConfig.cc objects fill,
// one per module, and the emulated launch.
#include <map>
#include <string>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#include "tests/cuda/emulation/MoeGemmEmu.h"

namespace {
std::map<std::string, MgEmuKernel>& Registry() {
  static std::map<std::string, MgEmuKernel> r;
  return r;
}
}  // namespace

void emu_register(const char* key, void (*fn)(const void*)) { Registry()[key] = fn; }

MgEmuKernel MgEmuFind(const std::string& key) {
  auto it = Registry().find(key);
  return it == Registry().end() ? nullptr : it->second;
}

void MgEmuLaunch(const std::string& key, unsigned grid, unsigned block, const void* params) {
  emu_launch(MgEmuFind(key), grid, block, params);
}
