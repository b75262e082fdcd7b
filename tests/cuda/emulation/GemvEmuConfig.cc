// One Gemv.cu module for the host emulation (gemv_run.sh compiles this file once per module key
// GemvEmuMain.cc's cases launch): the key's -D constants, GV_EMU_KEY (the key itself) and an
// EMU_ID naming the module's namespace. Registers "<module key>::<entry>" for the entries the
// module has.
#include <string>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GemvParams.h"
#include "kernels/cuda/KernelParams.h"
#undef __CUDACC__
#define f16_to_f32 emu_half
#define EMU_PASTE2(a, b) a##b
#define EMU_PASTE(a, b) EMU_PASTE2(a, b)
#define gemv EMU_PASTE(emu_gemv_, EMU_ID)
#define gemv_swiglu EMU_PASTE(emu_gemv_swiglu_, EMU_ID)
#define gemv_group EMU_PASTE(emu_gemv_group_, EMU_ID)
#define gemv_splitk EMU_PASTE(emu_gemv_splitk_, EMU_ID)
#define gemv_norm EMU_PASTE(emu_gemv_norm_, EMU_ID)
#define gemv_swiglu_norm EMU_PASTE(emu_gemv_swiglu_norm_, EMU_ID)
#define gemv_group_norm EMU_PASTE(emu_gemv_group_norm_, EMU_ID)
namespace EMU_PASTE(emu_ns_, EMU_ID) {
#include "kernels/cuda/Gemv.cu"
}
void emu_register(const char* key, void (*fn)(const void*));
namespace {
using namespace EMU_PASTE(emu_ns_, EMU_ID);
void Plain(const void* p) { gemv(*static_cast<const GemvParams*>(p)); }
void Swiglu(const void* p) { gemv_swiglu(*static_cast<const GemvSwigluParams*>(p)); }
void Group(const void* p) { gemv_group(*static_cast<const GemvGroupParams*>(p)); }
#if GEMV_SPLITK == 2 && GEMV_W != 3 && GEMV_STEPS % 2 == 0
void SplitK(const void* p) { gemv_splitk(*static_cast<const GemvParams*>(p)); }
#endif
const int reg = (emu_register((std::string(GV_EMU_KEY) + "::gemv").c_str(), &Plain),
                 emu_register((std::string(GV_EMU_KEY) + "::gemv_swiglu").c_str(), &Swiglu),
                 emu_register((std::string(GV_EMU_KEY) + "::gemv_group").c_str(), &Group),
#if GEMV_SPLITK == 2 && GEMV_W != 3 && GEMV_STEPS % 2 == 0
                 emu_register((std::string(GV_EMU_KEY) + "::gemv_splitk").c_str(), &SplitK),
#endif
                 0);
}  // namespace
