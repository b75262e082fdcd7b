// How a weight matrix lives on the device, one entry per (GGUF dtype, weight mode) (the
// weight-layout registry): its layout (the GGUF bytes as stored, a bf16 copy, a repacked form),
// the compute dtype cuBLASLt and the activation cast see, the Gemv.cu storage that reads it, its
// device bytes, and its repacker at upload. Selection asks MatrixLayoutFor(dtype, mode) (ShapesAt
// puts the answer in OpShapes::in_layouts, which the units read), the executor uploads what
// Repack returns (nothing: the GGUF bytes themselves); kernels get a DeviceMatrix. A new format =
// its dequantizer in Dequant.cu (HasGpuDequantizer) and, later, the kernels that read it directly.
//
// Block formats (q8_0, q4_K, ...) are held one of two ways, the weight mode (`--weights`):
//   blocks (default)  the GGUF blocks as stored (kBlocks): row r of a [rows, cols] matrix at
//                     data + r * row_bytes, row_bytes = cols / block_elems * block_bytes, so the
//                     device holds exactly the file's tensor bytes and the upload is a copy.
//                     Products dequantize the matrix into the executor's bf16 workspace
//                     (Dequant.cu, bit-exact with ggml before the bf16 rounding) and run the bf16
//                     cuBLASLt GEMM; embedding lookups dequantize their rows to f32 (exact).
//   bf16              a bf16 copy dequantized on the host at upload (kBf16Dequantized), as
//                     before blocks existed: 2 bytes per weight, no per-step dequantization.
// f32 / f16 / bf16 are stored as they are in both modes (f16 stays f16: cuBLASLt computes with
// f16 operands and f32 accumulation, no bf16 rounding).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ir/DType.h"

namespace memra::kernels::cuda {

enum class WeightLayoutKind {
  kAsStored,         // f32 / f16 / bf16: the GGUF bytes, uploaded unchanged
  kBlocks,           // a ggml block format: the GGUF blocks, uploaded unchanged (row-major rows of blocks)
  kBf16Dequantized,  // any block format: dequantized on the host (bit-exact with ggml), rounded to bf16
  kQ8Repacked,       // q8_0: int8 values [rows, cols] + one f32 scale per 32 (16-byte aligned loads)
};

// How block-format matrices are held (memra run / bench / compile `--weights blocks|bf16`,
// select-kernels{weights=...}, CudaExecutorOptions::weights, the module attribute kernel_weights
// and the plan header's `weights` line).
enum class WeightMode {
  kBlocks,  // as stored (kBlocks layouts)
  kBf16,    // dequantized to bf16 at upload (kBf16Dequantized)
};
absl::string_view WeightModeName(WeightMode mode);  // "blocks", "bf16"
absl::StatusOr<WeightMode> ParseWeightMode(absl::string_view name);

struct WeightLayout {
  WeightLayoutKind kind;
  absl::string_view name;     // "f32", "q4_K (blocks)", "bf16 (dequantized at upload)"
  ir::DType compute_dtype;    // what cuBLASLt reads: f32, f16 or bf16 (the activations are cast to it;
                              // a kBlocks matrix is dequantized to it first)
  int gemv_storage;           // Gemv.cu GEMV_W: 0 none (stays on cuBLASLt), 1 f16, 2 bf16, 3 q8, 4 f32
  absl::string_view readers;  // which kernels read it (documentation, memra inspect)
};

// Whether kernels/cuda/Dequant.cu dequantizes `stored` (a block format the kBlocks layout holds):
// q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, mxfp4.
bool HasGpuDequantizer(ir::DType stored);
// Those formats, in DTypes.def order.
const std::vector<ir::DType>& GpuBlockFormats();

// The layout a matrix stored as `stored` gets under `mode`, or nullptr when the GPU has none: a
// block format without a GPU dequantizer in blocks mode, a format memra cannot dequantize at all
// in bf16 mode, or a non-float scalar type.
const WeightLayout* FindMatrixLayout(ir::DType stored, WeightMode mode);
// The same, as an error naming the tensor (`what`: "weight @blk.0.ffn_up.weight" or a tensor
// name), its type and the way out (`--weights bf16` where that holds the type).
absl::StatusOr<const WeightLayout*> MatrixLayoutFor(ir::DType stored, WeightMode mode, absl::string_view what);
// The repacked q8 layout (not selected: the q8 GEMV reached only 29-46 % of the HBM roofline,
// bench/RESULTS.md); memra-kernel-bench measures it.
const WeightLayout& Q8Layout();

// Device bytes of a [rows, cols] matrix stored as `stored` in `layout` (data + scales). kAsStored
// and kBlocks: the GGUF tensor bytes.
int64_t LayoutBytes(const WeightLayout& layout, ir::DType stored, int64_t rows, int64_t cols);
// Bytes of the bf16 copy a product dequantizes the matrix into (the executor's workspace): rows *
// cols * 2 for kBlocks, 0 for layouts a product reads directly.
int64_t DequantWorkspaceBytes(const WeightLayout& layout, int64_t rows, int64_t cols);

// The host arrays to upload for a matrix stored as `stored` ([rows, cols], GGUF bytes `src`).
// kAsStored and kBlocks return nothing (upload `src` itself: no host copy of a large model).
struct RepackedMatrix {
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales;
};
absl::StatusOr<RepackedMatrix> Repack(const WeightLayout& layout, ir::DType stored, int64_t rows, int64_t cols,
                                      absl::Span<const uint8_t> src, int threads = 0);

// A matrix as the device holds it (what Bind sees).
struct DeviceMatrix {
  uint64_t data = 0;    // the layout's main array (kBlocks: the GGUF blocks)
  uint64_t scales = 0;  // kQ8Repacked's scales, else 0
  int64_t rows = 0, cols = 0;
  ir::DType stored = ir::DType::kF32;
  const WeightLayout* layout = nullptr;
  int64_t bytes = 0;
  // kBlocks: bytes of one row of blocks (cols / block_elems * block_bytes).
  int64_t row_bytes() const;
};

}  // namespace memra::kernels::cuda
