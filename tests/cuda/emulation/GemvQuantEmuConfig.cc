// One GemvQuant.cu module for the host emulation: the -D constants of the module (GQ_*) and an
// EMU_ID naming its entries; registers "<module key>::<entry>" for GemvQuantEmuMain.cc.
#include <string>
#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GemvQuantParams.h"
#include "kernels/cuda/KernelParams.h"
#undef __CUDACC__
#define f16_to_f32 emu_half
#define EMU_PASTE2(a, b) a##b
#define EMU_PASTE(a, b) EMU_PASTE2(a, b)
#define gemv_q EMU_PASTE(emu_gemv_q_, EMU_ID)
#define gemv_q_swiglu EMU_PASTE(emu_gemv_q_swiglu_, EMU_ID)
#define gemv_q_quantize_x EMU_PASTE(emu_quantize_, EMU_ID)
namespace EMU_PASTE(emu_ns_, EMU_ID) {
#include "kernels/cuda/GemvQuant.cu"
}
namespace {
using namespace EMU_PASTE(emu_ns_, EMU_ID);
std::string Key() {
  auto d = [](const char* n, long v) { return std::string(n) + "=" + std::to_string(v); };
  return "GemvQuant.cu<" + d("GQ_FMT", GQ_FMT) + "," + d("GQ_K", GQ_K) + "," + d("GQ_MINB", GQ_MINB) + "," +
         (GQ_PAIR_DOT ? "" : d("GQ_PAIR_DOT", 0) + ",") + d("GQ_R", GQ_R) + "," +
         (GQ_REALIGN ? d("GQ_REALIGN", 1) + "," : "") + (GQ_SCALES ? d("GQ_SCALES", 1) + "," : "") + d("GQ_ST", GQ_ST) +
         "," + (GQ_STREAM ? d("GQ_STREAM", 1) + "," : "") + d("GQ_SWIGLU", GQ_SWIGLU) + "," + d("GQ_T", GQ_T) + "," +
         d("GQ_WARPS", GQ_WARPS) + "," + (GQ_XPRE ? d("GQ_XPRE", 1) + "," : "") + d("GQ_XQ", GQ_XQ) + ">";
}
void Main(const void* p) {
#if GQ_SWIGLU
  gemv_q_swiglu(*static_cast<const GemvQuantParams*>(p));
#else
  gemv_q(*static_cast<const GemvQuantParams*>(p));
#endif
}
void Quant(const void* p) { gemv_q_quantize_x(*static_cast<const GemvQuantXParams*>(p)); }
const int reg = (emu_register((Key() + (GQ_SWIGLU ? "::gemv_q_swiglu" : "::gemv_q")).c_str(), &Main),
                 emu_register((Key() + "::gemv_q_quantize_x").c_str(), &Quant), 0);
}  // namespace
