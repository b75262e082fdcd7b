// Declaring a GGUF's tensors as module weights, checked against the shapes a lowering expects,
// and the dtype rule for weights read as values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/Module.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

// Declares tensor `name` as a weight of `m` with the expected ggml `ne` (trailing 1s of the
// stored shape are ignored). Errors name the tensor: missing (NotFound), another shape (both
// shapes), a type the IR has no dtype for, a quantized row that is not whole blocks.
absl::Status DeclareWeight(const gguf::GgufFile& file, ir::Module& m, const std::string& name, std::vector<int64_t> ne);

// Weights read as values rather than as matrices (ir::IsMatrixOperand: norm weights, biases,
// conv kernels, ssm_a) must be f32, the type the kernels read them in. Call after the functions
// are built (the uses decide). The error names the first such tensor of another type.
absl::Status CheckValueWeightsAreF32(const gguf::GgufFile& file, const ir::Module& m);

// The layer tensors agree with the layer count (`block_count_key` names it in errors): no
// `blk.N.*` tensor at N >= block_count (the metadata would silently run fewer layers than the file
// holds, where llama.cpp refuses a file with tensors it does not use), every layer below
// block_count holds some (a count past the file's layers is refused before per-layer tables of that
// size are made), and each of the last
// `nextn` layers (MTP blocks, not run) that holds tensors holds its `blk.N.nextn.*` ones (a trunk
// layer counted as MTP would be skipped).
absl::Status CheckLayerTensors(const gguf::GgufFile& file, int64_t block_count, int64_t nextn,
                               const std::string& block_count_key);

}  // namespace memra::frontends
