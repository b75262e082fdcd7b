// The contract between a kernel and its host launcher: every kernel entry takes one parameter
// struct by value, declared in a *Params.h header that both the NVRTC source and the host unit
// (kernels/cuda/*.cc) include. Device addresses are `T*` in the kernel and an 8-byte DevicePtr<T>
// on the host; MEMRA_PARAMS_SIZE / MEMRA_PARAMS_OFFSET pin each struct's size and field offsets
// to literal numbers: the host build checks both, the NVRTC compile the sizes (NVRTC has no
// offsetof; in CI by tests/cuda/NvrtcCompile_test), so a layout that differs fails to build.
//
// Field order: pointers first, then 8-byte integers, then 4-byte fields, so offsets are plain.
#pragma once

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define MEMRA_DPTR(T) T*
#define MEMRA_PARAMS_BEGIN
#define MEMRA_PARAMS_END
#else
namespace memra::kernels::cuda {
// A device address as the host writes it into a parameter struct (same size and alignment as a
// device pointer; the pointee type documents what the kernel reads or writes).
template <typename T>
struct DevicePtr {
  constexpr DevicePtr(unsigned long long a = 0) : addr(a) {}  // NOLINT: implicit from an address
  unsigned long long addr;
};
}  // namespace memra::kernels::cuda
#define MEMRA_DPTR(T) ::memra::kernels::cuda::DevicePtr<T>
#define MEMRA_PARAMS_BEGIN namespace memra::kernels::cuda {
#define MEMRA_PARAMS_END }
#endif

#define MEMRA_PARAMS_SIZE(S, n) static_assert(sizeof(S) == (n), #S ": size differs from the host/device contract")
#if defined(__CUDACC_RTC__)
// NVRTC has no offsetof (no __builtin_offsetof, and address arithmetic is not a constant
// expression there): the device side checks sizes only; offsets are checked by the host compiler.
#define MEMRA_PARAMS_OFFSET(S, f, n)
#else
#define MEMRA_PARAMS_OFFSET(S, f, n) \
  static_assert(__builtin_offsetof(S, f) == (n), #S "." #f ": offset differs from the host/device contract")
#endif
