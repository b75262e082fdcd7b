// How a weight matrix lives on the device, one entry per GGUF dtype (the weight-layout registry):
// its layout (blocks as stored, repacked blocks, a 16-bit copy), the compute dtype cuBLASLt and
// the activation cast see, the Gemv.cu storage that reads it, its device bytes, and its repacker
// at upload. The executor asks MatrixLayoutFor(dtype) and uploads what Repack returns; kernels
// get a DeviceMatrix. A new format = a layout here + the kernels that read it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ir/DType.h"

namespace memra::kernels::cuda {

enum class WeightLayoutKind {
  kAsStored,         // f32 / f16 / bf16: the GGUF bytes, uploaded unchanged
  kBf16Dequantized,  // any block format: dequantized on the host (bit-exact with ggml), rounded to bf16
  kQ8Repacked,       // q8_0: int8 values [rows, cols] + one f32 scale per 32 (16-byte aligned loads)
};

struct WeightLayout {
  WeightLayoutKind kind;
  absl::string_view name;     // "f32", "bf16 (dequantized)", "q8_0 (repacked)"
  ir::DType compute_dtype;    // what cuBLASLt reads: f32, f16 or bf16 (the activations are cast to it)
  int gemv_storage;           // Gemv.cu GEMV_W: 0 none (stays on cuBLASLt), 1 f16, 2 bf16, 3 q8
  absl::string_view readers;  // which kernels read it (documentation, memra inspect)
};

// The layout a matrix stored as `stored` gets. Quantized formats use their bf16 copy: the q8
// GEMV (kQ8Repacked) reached only 29-46 % of the HBM roofline (bench/RESULTS.md), so it is not
// chosen; Q8Layout() stays for memra-kernel-bench.
const WeightLayout& MatrixLayoutFor(ir::DType stored);
const WeightLayout& Q8Layout();

// Device bytes of a [rows, cols] matrix in `layout` (data + scales).
int64_t LayoutBytes(const WeightLayout& layout, int64_t rows, int64_t cols);

// The host arrays to upload for a matrix stored as `stored` ([rows, cols], GGUF bytes `src`).
// kAsStored returns nothing (upload `src` itself: no host copy of a large model).
struct RepackedMatrix {
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales;
};
absl::StatusOr<RepackedMatrix> Repack(const WeightLayout& layout, ir::DType stored, int64_t rows, int64_t cols,
                                      absl::Span<const uint8_t> src, int threads = 0);

// A matrix as the device holds it (what Bind sees).
struct DeviceMatrix {
  uint64_t data = 0;    // the layout's main array
  uint64_t scales = 0;  // kQ8Repacked's scales, else 0
  int64_t rows = 0, cols = 0;
  ir::DType stored = ir::DType::kF32;
  const WeightLayout* layout = nullptr;
  int64_t bytes = 0;
};

}  // namespace memra::kernels::cuda
