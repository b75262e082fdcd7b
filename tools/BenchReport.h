// The report of `memra bench` in llama-bench's output formats (llama.cpp
// tools/llama-bench/llama-bench.cpp, struct test and its printers), so the two tools' results can
// be read by the same scripts and sit side by side:
//
//   md     the table: model, size, params, backend, threads (cpu) or ngl (cuda), test, t/s;
//          numbers right-aligned, columns at least llama-bench's widths (wider when a value needs
//          it, so every row has the same width), then "build: <commit> (<number>)"
//   json   an array of objects: llama-bench's fields in its order, then samples_ns, samples_ts
//   jsonl  the same objects, one per line
//   csv    a header of llama-bench's field names, then one row of quoted values per test
//
// Field names, order and value types are llama-bench's (BenchFieldNames()). What memra fills from
// the run (BenchRecord): build_commit (memra's version, "memra 0.1.0"), cpu_info (/proc/cpuinfo's
// model name; empty when unknown), gpu_info (the CUDA device; empty on the cpu backend),
// backends ("CUDA" / "CPU"), model_filename (the path as given, as llama-bench), model_type
// (ModelTypeName: "qwen35 9B Q8_0"), model_size (tensor bytes), model_n_params, n_batch and
// n_ubatch (tokens per prefill call), n_threads (cpu: the pool's threads; cuda: 1, the host thread
// that drives the GPU), type_k / type_v (the KV cache dtype), n_gpu_layers (cuda: -1, llama's
// "all layers", as memra always offloads all; cpu: 0), flash_attn (1 = fused online-softmax
// attention: memra's CUDA kernel; 0: the CPU's two-pass softmax), devices ("CUDA0" / "none"),
// n_prompt, n_gen, n_depth, test_time (RFC 3339 UTC, when the test started), samples_ns (one per
// repetition; t/s derived as llama-bench does: 1e9 * (n_prompt + n_gen) / ns).
//
// What does not apply to memra is written in llama-bench's own encoding of "off / none", so a
// reader finds every field with its type: build_number 0 (llama.cpp's number when the build has
// no git count), cpu_mask "0x0", cpu_strict false, poll 0 (the CPU pool sleeps on a condition
// variable), n_cpu_moe 0, split_mode "none" (one device), main_gpu 0, no_kv_offload false,
// tensor_split "0.00", tensor_buft_overrides "none", load_mode "mmap" (memra maps the GGUF),
// embeddings false, no_op_offload 0, no_host false, fit_target 0, fit_min_ctx 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::tools {

// One test (pp, tg or tg at a depth) of one bench run.
struct BenchRecord {
  std::string build_commit;
  std::string cpu_info;
  std::string gpu_info;
  std::string backends;  // "CPU" or "CUDA"; also the md backend column, and "CPU" picks threads over ngl
  std::string model_filename;
  std::string model_type;
  uint64_t model_size = 0;
  uint64_t model_n_params = 0;
  int64_t n_batch = 0;
  int64_t n_ubatch = 0;
  int64_t n_threads = 0;
  int64_t tp = 1;  // tensor-parallel ranks (--tp); the md table shows a tp column when any is > 1
  std::string type_k;
  std::string type_v;
  int64_t n_gpu_layers = 0;
  int64_t flash_attn = 0;
  std::string devices;
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  int64_t n_depth = 0;
  std::string test_time;
  std::vector<uint64_t> samples_ns;

  // llama-bench's statistics: integer mean of the samples, sample standard deviation (n - 1;
  // 0 for fewer than 2 samples), and per-sample tokens/s = 1e9 * (n_prompt + n_gen) / ns.
  uint64_t avg_ns() const;
  uint64_t stddev_ns() const;
  std::vector<double> samples_ts() const;
  double avg_ts() const;
  double stddev_ts() const;
  // "pp512", "tg128", "pp512+tg128", with " @ d4096" at a depth.
  std::string TestName() const;
};

enum class BenchFormat { kMarkdown, kJson, kJsonl, kCsv };

// "md", "json", "jsonl", "csv"; anything else is InvalidArgument naming -o and those values.
absl::StatusOr<BenchFormat> ParseBenchFormat(absl::string_view name);

// llama-bench's test::get_fields(): the csv header, and the json keys before samples_ns/_ts.
const std::vector<std::string>& BenchFieldNames();

// The whole report (all records; a header and footer where the format has them).
std::string RenderBench(BenchFormat format, absl::Span<const BenchRecord> records);

// memra bench --tp 1,2,4: each test at each split against the same test at the first split in
// `records` (its baseline, normally tp 1): tok/s, speedup, and efficiency = speedup over the ranks'
// ratio. A markdown table; tests without a baseline row are left out.
std::string RenderTpScaling(absl::Span<const BenchRecord> records);

// One row of `memra bench --batch` (llama-batched-bench's table, llama.cpp
// tools/batched-bench/batched-bench.cpp, prompts not shared): B requests of pp prompt tokens each,
// then tg decode steps each; t_pp the seconds until every request has its first token, t_tg the
// rest. The info fields are llama-batched-bench's header / jsonl fields as memra fills them.
struct BatchedBenchRow {
  int64_t pp = 0;
  int64_t tg = 0;
  int64_t b = 0;
  double t_pp = 0;  // seconds
  double t_tg = 0;
  int64_t n_kv_max = 0;  // positions of all slots (slots x context per slot)
  int64_t n_batch = 0;   // scheduler rows per step
  int64_t n_ubatch = 0;  // rows per prefill call
  int64_t n_threads = 0;
  // llama's N_KV for unshared prompts: the KV positions the test fills, b * (pp + tg).
  int64_t n_kv() const { return b * (pp + tg); }
  double speed_pp() const;  // b * pp / t_pp
  double speed_tg() const;  // b * tg / t_tg (0 when tg or t_tg is 0)
  double speed() const;     // b * (pp + tg) / (t_pp + t_tg)
};

// md: llama-batched-bench's table exactly (its printf widths: |    PP |     TG |    B |   N_KV |
// ...); jsonl: its -jsonl objects, one per line; json: those objects in an array; csv: their keys
// as the header, one row per test.
std::string RenderBatchedBench(BenchFormat format, absl::Span<const BatchedBenchRow> rows);

// llama's model description "<architecture> <size> <file type>": the size is general.size_label,
// else the label convert_hf_to_gguf.py writes for the parameter count ("9.0B", "2.4M"); the file
// type is llama's name of general.file_type ("Q8_0", "all F32", "Q4_K - Medium"), else
// "(guessed) " and the name for the most common tensor type, as llama.cpp guesses it.
std::string ModelTypeName(const gguf::GgufFile& file);

// /proc/cpuinfo's first "model name" (empty when there is none).
std::string HostCpuDescription();

// Now as RFC 3339 UTC ("2026-12-01T17:48:06Z"), llama-bench's test_time.
std::string Rfc3339Now();

}  // namespace memra::tools
