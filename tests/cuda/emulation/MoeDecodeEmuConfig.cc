// One module of the MoE decode path compiled as host C++ over CudaHostEmulation.h, for
// moedecode_run.sh, which compiles this file once per module key MoeDecodeEmuMain.cc's cases launch
// (`--list`): the key's -D constants, MD_EMU_KEY (the key itself), MD_GEMVQ or MD_MOE (which file:
// GemvQuant.cu or Moe.cu) and an EMU_ID naming the module's namespace. Registers
// "<module key>::<entry>" for the entries the MoE units launch (MoeGemmEmuLaunch.cc holds the
// registry).
#include <cmath>
#include <cstring>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/KernelParams.h"
#if defined(MD_GEMVQ)
#include "kernels/cuda/GemvQuantParams.h"
#else
#include "kernels/cuda/MoeParams.h"
#endif
#undef __CUDACC__

#define f16_to_f32 emu_half
#define EMU_PASTE2(a, b) a##b
#define EMU_PASTE(a, b) EMU_PASTE2(a, b)

#if defined(MD_GEMVQ)
#define gemv_q_moe_down EMU_PASTE(emu_gemv_q_moe_down_, EMU_ID)
#define gemv_q_moe_swiglu EMU_PASTE(emu_gemv_q_moe_swiglu_, EMU_ID)
#define gemv_q_moe EMU_PASTE(emu_gemv_q_moe_, EMU_ID)
#define gemv_q_swiglu EMU_PASTE(emu_gemv_q_swiglu_, EMU_ID)
#define gemv_q EMU_PASTE(emu_gemv_q_, EMU_ID)
#define gemv_q_quantize_x EMU_PASTE(emu_quantize_, EMU_ID)
namespace EMU_PASTE(emu_ns_, EMU_ID) {
#include "kernels/cuda/GemvQuant.cu"
}
namespace {
using namespace EMU_PASTE(emu_ns_, EMU_ID);
void Quant(const void* p) { gemv_q_quantize_x(*static_cast<const GemvQuantXParams*>(p)); }
#if GQ_MOE == 2
void Main(const void* p) { gemv_q_moe_down(*static_cast<const GemvQuantMoeParams*>(p)); }
constexpr const char* kEntry = "::gemv_q_moe_down";
#elif GQ_MOE && GQ_SWIGLU
void Main(const void* p) { gemv_q_moe_swiglu(*static_cast<const GemvQuantMoeParams*>(p)); }
constexpr const char* kEntry = "::gemv_q_moe_swiglu";
#elif GQ_MOE
void Main(const void* p) { gemv_q_moe(*static_cast<const GemvQuantMoeParams*>(p)); }
constexpr const char* kEntry = "::gemv_q_moe";
#else
void Main(const void*) {}  // a module launched for its quantize entry only
constexpr const char* kEntry = "::none";
#endif
const int reg = (emu_register((std::string(MD_EMU_KEY) + kEntry).c_str(), &Main),
                 emu_register(MD_EMU_KEY "::gemv_q_quantize_x", &Quant), 0);
}  // namespace
#else
#define moe_route EMU_PASTE(emu_moe_route_, EMU_ID)
#define moe_route_sigmoid EMU_PASTE(emu_moe_route_sigmoid_, EMU_ID)
#define moe_combine EMU_PASTE(emu_moe_combine_, EMU_ID)
#define gated_add_f32 EMU_PASTE(emu_gated_add_, EMU_ID)
namespace EMU_PASTE(emu_ns_, EMU_ID) {
#include "kernels/cuda/Moe.cu"
}
namespace {
using namespace EMU_PASTE(emu_ns_, EMU_ID);
void Combine(const void* p) { moe_combine(*static_cast<const MoeCombineParams*>(p)); }
const int reg = (emu_register(MD_EMU_KEY "::moe_combine", &Combine), 0);
}  // namespace
#endif
