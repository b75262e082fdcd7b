// The emulated launch, apart from GemvQuantEmuMain.cc (which includes memra's host headers; the
// emulation header redefines CUDA keywords).
#include "tests/cuda/emulation/CudaHostEmulation.h"
void emu_launch_fn(void (*fn)(const void*), unsigned grid, unsigned block, const void* params) {
  emu_launch(fn, grid, block, params);
}
void emu_set_reverse_blocks(bool reverse) { emu_reverse_blocks = reverse; }
