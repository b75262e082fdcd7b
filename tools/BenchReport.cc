#include "tools/BenchReport.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "frontends/gguf/GgufFile.h"
#include "kernels/formats/GgmlType.h"

namespace memra::tools {
namespace {

using formats::GgmlType;

// Mean and sample standard deviation (n - 1), as llama-bench's avg / stdev.
double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}
double Stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1));
}

enum class FieldType { kString, kBool, kInt, kFloat };

struct Field {
  const char* name;
  FieldType type;
  std::string (*value)(const BenchRecord&);
};

std::string Int(int64_t v) { return absl::StrCat(v); }
std::string Bool(bool v) { return v ? "1" : "0"; }                // llama-bench's std::to_string(bool)
std::string Fixed(double v) { return absl::StrFormat("%f", v); }  // std::to_string(double)

// llama-bench's test::get_fields() / get_field_type() / get_values(), in its order.
const std::vector<Field>& Fields() {
  using R = const BenchRecord&;
  using T = FieldType;
  static const std::vector<Field> fields = {
      {"build_commit", T::kString, [](R r) { return r.build_commit; }},
      {"build_number", T::kInt, [](R) { return Int(0); }},
      {"cpu_info", T::kString, [](R r) { return r.cpu_info; }},
      {"gpu_info", T::kString, [](R r) { return r.gpu_info; }},
      {"backends", T::kString, [](R r) { return r.backends; }},
      {"model_filename", T::kString, [](R r) { return r.model_filename; }},
      {"model_type", T::kString, [](R r) { return r.model_type; }},
      {"model_size", T::kInt, [](R r) { return absl::StrCat(r.model_size); }},
      {"model_n_params", T::kInt, [](R r) { return absl::StrCat(r.model_n_params); }},
      {"n_batch", T::kInt, [](R r) { return Int(r.n_batch); }},
      {"n_ubatch", T::kInt, [](R r) { return Int(r.n_ubatch); }},
      {"n_threads", T::kInt, [](R r) { return Int(r.n_threads); }},
      {"cpu_mask", T::kString, [](R) { return std::string("0x0"); }},
      {"cpu_strict", T::kBool, [](R) { return Bool(false); }},
      {"poll", T::kInt, [](R) { return Int(0); }},
      {"type_k", T::kString, [](R r) { return r.type_k; }},
      {"type_v", T::kString, [](R r) { return r.type_v; }},
      {"n_gpu_layers", T::kInt, [](R r) { return Int(r.n_gpu_layers); }},
      {"n_cpu_moe", T::kInt, [](R) { return Int(0); }},
      {"split_mode", T::kString, [](R) { return std::string("none"); }},
      {"main_gpu", T::kInt, [](R) { return Int(0); }},
      {"no_kv_offload", T::kBool, [](R) { return Bool(false); }},
      {"flash_attn", T::kInt, [](R r) { return Int(r.flash_attn); }},
      {"devices", T::kString, [](R r) { return r.devices; }},
      {"tensor_split", T::kString, [](R) { return std::string("0.00"); }},
      {"tensor_buft_overrides", T::kString, [](R) { return std::string("none"); }},
      {"load_mode", T::kString, [](R) { return std::string("mmap"); }},
      {"embeddings", T::kBool, [](R) { return Bool(false); }},
      {"no_op_offload", T::kInt, [](R) { return Int(0); }},
      {"no_host", T::kBool, [](R) { return Bool(false); }},
      {"fit_target", T::kInt, [](R) { return Int(0); }},
      {"fit_min_ctx", T::kInt, [](R) { return Int(0); }},
      {"n_prompt", T::kInt, [](R r) { return Int(r.n_prompt); }},
      {"n_gen", T::kInt, [](R r) { return Int(r.n_gen); }},
      {"n_depth", T::kInt, [](R r) { return Int(r.n_depth); }},
      {"test_time", T::kString, [](R r) { return r.test_time; }},
      {"avg_ns", T::kInt, [](R r) { return absl::StrCat(r.avg_ns()); }},
      {"stddev_ns", T::kInt, [](R r) { return absl::StrCat(r.stddev_ns()); }},
      {"avg_ts", T::kFloat, [](R r) { return Fixed(r.avg_ts()); }},
      {"stddev_ts", T::kFloat, [](R r) { return Fixed(r.stddev_ts()); }},
  };
  return fields;
}

// As llama-bench's escape_json (control bytes as \u00XX; other bytes, UTF-8 included, as is).
std::string EscapeJson(absl::string_view s) {
  std::string out;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (u <= 0x1f) {
      out += absl::StrFormat("\\u%04x", u);
    } else {
      out += c;
    }
  }
  return out;
}

std::string JsonValue(const Field& f, const std::string& v) {
  switch (f.type) {
    case FieldType::kString:
      return absl::StrCat("\"", EscapeJson(v), "\"");
    case FieldType::kBool:
      return v == "0" ? "false" : "true";
    default:
      return v;
  }
}

std::string EscapeCsv(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// llama-bench joins samples with an ostream: integers as is, doubles with 6 significant digits.
std::string SamplesNs(const BenchRecord& r) { return absl::StrJoin(r.samples_ns, ", "); }
std::string SamplesTs(const BenchRecord& r) {
  std::vector<std::string> v;
  for (double t : r.samples_ts()) v.push_back(absl::StrFormat("%g", t));
  return absl::StrJoin(v, ", ");
}

std::string RenderJson(absl::Span<const BenchRecord> records) {
  std::string out = "[\n";
  for (size_t i = 0; i < records.size(); ++i) {
    const BenchRecord& r = records[i];
    if (i > 0) out += ",\n";
    out += "  {\n";
    for (const Field& f : Fields()) absl::StrAppend(&out, "    \"", f.name, "\": ", JsonValue(f, f.value(r)), ",\n");
    absl::StrAppend(&out, "    \"samples_ns\": [ ", SamplesNs(r), " ],\n");
    absl::StrAppend(&out, "    \"samples_ts\": [ ", SamplesTs(r), " ]\n");
    out += "  }";
  }
  return out + "\n]\n";
}

std::string RenderJsonl(absl::Span<const BenchRecord> records) {
  std::string out;
  for (const BenchRecord& r : records) {
    out += "{";
    for (const Field& f : Fields()) absl::StrAppend(&out, "\"", f.name, "\": ", JsonValue(f, f.value(r)), ", ");
    absl::StrAppend(&out, "\"samples_ns\": [ ", SamplesNs(r), " ],");
    absl::StrAppend(&out, "\"samples_ts\": [ ", SamplesTs(r), " ]");
    out += "}\n";
  }
  return out;
}

std::string RenderCsv(absl::Span<const BenchRecord> records) {
  std::string out = absl::StrCat(absl::StrJoin(BenchFieldNames(), ","), "\n");
  for (const BenchRecord& r : records) {
    std::vector<std::string> v;
    for (const Field& f : Fields()) v.push_back(EscapeCsv(f.value(r)));
    absl::StrAppend(&out, absl::StrJoin(v, ","), "\n");
  }
  return out;
}

// Characters on screen: UTF-8 code points ("±" is two bytes, one column).
size_t DisplayWidth(absl::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string Pad(const std::string& s, size_t width, bool right) {
  const size_t w = DisplayWidth(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + s : s + fill;
}

std::string MarkdownValue(const std::string& column, const BenchRecord& r) {
  if (column == "model") return r.model_type;
  if (column == "size")
    return r.model_size < 1024ull * 1024 * 1024 ? absl::StrFormat("%.2f MiB", r.model_size / 1024.0 / 1024.0)
                                                : absl::StrFormat("%.2f GiB", r.model_size / 1024.0 / 1024.0 / 1024.0);
  if (column == "params")
    return r.model_n_params < 1000ull * 1000 * 1000 ? absl::StrFormat("%.2f M", r.model_n_params / 1e6)
                                                    : absl::StrFormat("%.2f B", r.model_n_params / 1e9);
  if (column == "backend") return r.backends;
  if (column == "ngl") return Int(r.n_gpu_layers);
  if (column == "threads") return Int(r.n_threads);
  if (column == "tp") return Int(r.tp);
  if (column == "test") return r.TestName();
  return absl::StrFormat("%.2f ± %.2f", r.avg_ts(), r.stddev_ts());  // t/s
}

// llama-bench's markdown_printer: its columns and minimum widths (negative: left-aligned).
std::string RenderMarkdown(absl::Span<const BenchRecord> records) {
  const bool cpu = records.empty() || records[0].backends == "CPU";
  struct Column {
    std::string name;
    int width;
  };
  std::vector<Column> cols = {{"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10}};
  cols.push_back(cpu ? Column{"threads", 7} : Column{"ngl", 3});
  if (std::any_of(records.begin(), records.end(), [](const BenchRecord& r) { return r.tp > 1; }))
    cols.push_back({"tp", 2});
  cols.push_back({"test", 15});
  cols.push_back({"t/s", 20});
  std::vector<std::vector<std::string>> rows;
  for (const BenchRecord& r : records) {
    rows.emplace_back();
    for (const Column& c : cols) rows.back().push_back(MarkdownValue(c.name, r));
  }
  std::vector<size_t> widths;
  for (size_t i = 0; i < cols.size(); ++i) {
    size_t w = std::max<size_t>(std::abs(cols[i].width), DisplayWidth(cols[i].name));
    for (const auto& row : rows) w = std::max(w, DisplayWidth(row[i]));
    widths.push_back(w);
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t i = 0; i < cells.size(); ++i)
      absl::StrAppend(&out, " ", Pad(cells[i], widths[i], cols[i].width > 0), " |");
    return out + "\n";
  };
  std::vector<std::string> header, rule;
  for (size_t i = 0; i < cols.size(); ++i) {
    header.push_back(cols[i].name);
    rule.push_back(std::string(widths[i] - 1, '-') + (cols[i].width > 0 ? ":" : "-"));
  }
  std::string out = line(header) + line(rule);
  for (const auto& row : rows) out += line(row);
  if (!records.empty()) absl::StrAppend(&out, "\nbuild: ", records[0].build_commit, " (0)\n");
  return out;
}

// llama_ftype -> llama_ftype_name (llama.cpp src/llama-model-loader.cpp).
const char* FtypeName(uint32_t ftype) {
  static const std::map<uint32_t, const char*> names = {
      {0, "all F32"},
      {1, "F16"},
      {2, "Q4_0"},
      {3, "Q4_1"},
      {7, "Q8_0"},
      {8, "Q5_0"},
      {9, "Q5_1"},
      {10, "Q2_K - Medium"},
      {11, "Q3_K - Small"},
      {12, "Q3_K - Medium"},
      {13, "Q3_K - Large"},
      {14, "Q4_K - Small"},
      {15, "Q4_K - Medium"},
      {16, "Q5_K - Small"},
      {17, "Q5_K - Medium"},
      {18, "Q6_K"},
      {19, "IQ2_XXS - 2.0625 bpw"},
      {20, "IQ2_XS - 2.3125 bpw"},
      {21, "Q2_K - Small"},
      {22, "IQ3_XS - 3.3 bpw"},
      {23, "IQ3_XXS - 3.0625 bpw"},
      {24, "IQ1_S - 1.5625 bpw"},
      {25, "IQ4_NL - 4.5 bpw"},
      {26, "IQ3_S - 3.4375 bpw"},
      {27, "IQ3_S mix - 3.66 bpw"},
      {28, "IQ2_S - 2.5 bpw"},
      {29, "IQ2_M - 2.7 bpw"},
      {30, "IQ4_XS - 4.25 bpw"},
      {31, "IQ1_M - 1.75 bpw"},
      {32, "BF16"},
      {36, "TQ1_0 - 1.69 bpw ternary"},
      {37, "TQ2_0 - 2.06 bpw ternary"},
      {38, "MXFP4 MoE"},
      {39, "NVFP4"},
      {40, "Q1_0"},
      {41, "Q2_0"},
  };
  auto it = names.find(ftype);
  return it == names.end() ? "unknown, may not work" : it->second;
}

// llama.cpp's guess when general.file_type is absent: the ftype of the most common tensor type.
uint32_t GuessFtype(const gguf::GgufFile& file) {
  std::map<GgmlType, int> count;
  GgmlType best = GgmlType::kF32;
  int best_n = 0;
  for (const auto& t : file.tensors())
    if (++count[t.type] > best_n) {
      best_n = count[t.type];
      best = t.type;
    }
  static const std::map<GgmlType, uint32_t> ftype = {
      {GgmlType::kF32, 0},     {GgmlType::kF16, 1},     {GgmlType::kBF16, 32},    {GgmlType::kQ4_0, 2},
      {GgmlType::kQ4_1, 3},    {GgmlType::kQ5_0, 8},    {GgmlType::kQ5_1, 9},     {GgmlType::kQ8_0, 7},
      {GgmlType::kQ2_K, 10},   {GgmlType::kQ3_K, 12},   {GgmlType::kQ4_K, 15},    {GgmlType::kQ5_K, 17},
      {GgmlType::kQ6_K, 18},   {GgmlType::kTQ1_0, 36},  {GgmlType::kTQ2_0, 37},   {GgmlType::kIQ2_XXS, 19},
      {GgmlType::kIQ2_XS, 20}, {GgmlType::kIQ2_S, 28},  {GgmlType::kIQ3_XXS, 23}, {GgmlType::kIQ1_S, 24},
      {GgmlType::kIQ1_M, 31},  {GgmlType::kIQ4_NL, 25}, {GgmlType::kIQ4_XS, 30},  {GgmlType::kIQ3_S, 26},
      {GgmlType::kMXFP4, 38},
  };
  auto it = ftype.find(best);
  return it == ftype.end() ? 0 : it->second;  // llama.cpp: "unknown type" -> all F32
}

// gguf-py's model_weight_count_rounded_notation(n, min_digits=2).
std::string SizeLabel(uint64_t n) {
  double x = n * 1e-3;
  const char* suffix = "K";
  if (n > 1e12) {
    x = n * 1e-12, suffix = "T";
  } else if (n > 1e9) {
    x = n * 1e-9, suffix = "B";
  } else if (n > 1e6) {
    x = n * 1e-6, suffix = "M";
  }
  const double r = std::nearbyint(x);  // Python's round: half to even (the default rounding mode)
  const int digits = r < 1 ? 0 : static_cast<int>(absl::StrCat(static_cast<uint64_t>(r)).size());
  return absl::StrFormat("%.*f%s", std::max(2 - digits, 0), x, suffix);
}

}  // namespace

uint64_t BenchRecord::avg_ns() const {
  if (samples_ns.empty()) return 0;
  uint64_t sum = 0;
  for (uint64_t s : samples_ns) sum += s;
  return sum / samples_ns.size();
}

uint64_t BenchRecord::stddev_ns() const {
  return static_cast<uint64_t>(std::llround(Stddev(std::vector<double>(samples_ns.begin(), samples_ns.end()))));
}

std::vector<double> BenchRecord::samples_ts() const {
  std::vector<double> ts;
  for (uint64_t ns : samples_ns) ts.push_back(1e9 * static_cast<double>(n_prompt + n_gen) / std::max<uint64_t>(ns, 1));
  return ts;
}

double BenchRecord::avg_ts() const { return Mean(samples_ts()); }
double BenchRecord::stddev_ts() const { return Stddev(samples_ts()); }

std::string BenchRecord::TestName() const {
  std::string s = n_prompt > 0 && n_gen == 0   ? absl::StrCat("pp", n_prompt)
                  : n_gen > 0 && n_prompt == 0 ? absl::StrCat("tg", n_gen)
                                               : absl::StrCat("pp", n_prompt, "+tg", n_gen);
  if (n_depth > 0) absl::StrAppend(&s, " @ d", n_depth);
  return s;
}

absl::StatusOr<BenchFormat> ParseBenchFormat(absl::string_view name) {
  if (name == "md") return BenchFormat::kMarkdown;
  if (name == "json") return BenchFormat::kJson;
  if (name == "jsonl") return BenchFormat::kJsonl;
  if (name == "csv") return BenchFormat::kCsv;
  return absl::InvalidArgumentError(absl::StrCat("-o ", name, ": expected md, json, jsonl or csv"));
}

const std::vector<std::string>& BenchFieldNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Field& f : Fields()) v.push_back(f.name);
    return v;
  }();
  return names;
}

std::string RenderTpScaling(absl::Span<const BenchRecord> records) {
  if (records.empty()) return "";
  const int64_t base_tp = records.front().tp;
  std::string out =
      absl::StrFormat("| %-20s | %3s | %14s | %8s | %10s |\n", "test", "tp", "t/s", "speedup", "efficiency");
  absl::StrAppend(&out, "| -------------------- | --: | -------------: | -------: | ---------: |\n");
  for (const BenchRecord& r : records) {
    const BenchRecord* base = nullptr;
    for (const BenchRecord& b : records)
      if (b.tp == base_tp && b.TestName() == r.TestName()) {
        base = &b;
        break;
      }
    if (base == nullptr || base->avg_ts() <= 0) continue;
    const double speedup = r.avg_ts() / base->avg_ts();
    const double efficiency = speedup * static_cast<double>(base_tp) / static_cast<double>(r.tp);
    absl::StrAppend(&out, absl::StrFormat("| %-20s | %3d | %14.2f | %7.2fx | %9.1f%% |\n", r.TestName(), r.tp,
                                          r.avg_ts(), speedup, 100.0 * efficiency));
  }
  return out;
}

std::string RenderBench(BenchFormat format, absl::Span<const BenchRecord> records) {
  switch (format) {
    case BenchFormat::kJson:
      return RenderJson(records);
    case BenchFormat::kJsonl:
      return RenderJsonl(records);
    case BenchFormat::kCsv:
      return RenderCsv(records);
    case BenchFormat::kMarkdown:
      break;
  }
  return RenderMarkdown(records);
}

double BatchedBenchRow::speed_pp() const { return t_pp > 0 ? static_cast<double>(b * pp) / t_pp : 0.0; }
double BatchedBenchRow::speed_tg() const { return t_tg > 0 ? static_cast<double>(b * tg) / t_tg : 0.0; }
double BatchedBenchRow::speed() const {
  const double t = t_pp + t_tg;
  return t > 0 ? static_cast<double>(b * (pp + tg)) / t : 0.0;
}

std::string RenderBatchedBench(BenchFormat format, absl::Span<const BatchedBenchRow> rows) {
  std::string out;
  if (format == BenchFormat::kMarkdown) {
    out = absl::StrFormat("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV",
                          "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
    out += absl::StrFormat("|%6s-|-%6s-|-%4s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|\n", "------", "------", "----",
                           "------", "--------", "--------", "--------", "--------", "--------", "--------");
    for (const BatchedBenchRow& r : rows)
      out += absl::StrFormat("|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", r.pp, r.tg,
                             r.b, r.n_kv(), r.t_pp, r.speed_pp(), r.t_tg, r.speed_tg(), r.t_pp + r.t_tg, r.speed());
    return out;
  }
  // llama-batched-bench's -jsonl keys and values (flash_attn 0: the CPU's two-pass softmax; no
  // prompt sharing; no GPU layers; one thread count for decode and batches).
  static const char* kKeys[] = {
      "n_kv_max", "n_batch", "n_ubatch", "flash_attn", "is_pp_shared", "n_gpu_layers", "n_threads", "n_threads_batch",
      "pp",       "tg",      "pl",       "n_kv",       "t_pp",         "speed_pp",     "t_tg",      "speed_tg",
      "t",        "speed"};
  auto values = [](const BatchedBenchRow& r) {
    return std::vector<std::string>{Int(r.n_kv_max),
                                    Int(r.n_batch),
                                    Int(r.n_ubatch),
                                    Int(0),
                                    Int(0),
                                    Int(0),
                                    Int(r.n_threads),
                                    Int(r.n_threads),
                                    Int(r.pp),
                                    Int(r.tg),
                                    Int(r.b),
                                    Int(r.n_kv()),
                                    Fixed(r.t_pp),
                                    Fixed(r.speed_pp()),
                                    Fixed(r.t_tg),
                                    Fixed(r.speed_tg()),
                                    Fixed(r.t_pp + r.t_tg),
                                    Fixed(r.speed())};
  };
  auto object = [&](const BatchedBenchRow& r) {
    const std::vector<std::string> v = values(r);
    std::vector<std::string> kv;
    for (size_t i = 0; i < v.size(); ++i) kv.push_back(absl::StrCat("\"", kKeys[i], "\": ", v[i]));
    return absl::StrCat("{", absl::StrJoin(kv, ", "), "}");
  };
  switch (format) {
    case BenchFormat::kJsonl:
      for (const BatchedBenchRow& r : rows) absl::StrAppend(&out, object(r), "\n");
      return out;
    case BenchFormat::kJson:
      out = "[\n";
      for (size_t i = 0; i < rows.size(); ++i) absl::StrAppend(&out, i > 0 ? ",\n" : "", "  ", object(rows[i]));
      return out + "\n]\n";
    default:  // csv
      out = absl::StrCat(absl::StrJoin(kKeys, ","), "\n");
      for (const BatchedBenchRow& r : rows) absl::StrAppend(&out, absl::StrJoin(values(r), ","), "\n");
      return out;
  }
}

std::string ModelTypeName(const gguf::GgufFile& file) {
  std::string arch = file.GetStringOr("general.architecture", "").value_or("");
  if (arch.empty()) arch = "?";
  std::string size = file.GetStringOr("general.size_label", "").value_or("");
  if (size.empty()) {
    uint64_t params = 0;
    for (const auto& t : file.tensors()) params += static_cast<uint64_t>(std::max<int64_t>(t.NumElements(), 0));
    size = SizeLabel(params);
  }
  auto ftype = file.GetU32("general.file_type");
  const std::string type = ftype.ok() ? FtypeName(*ftype) : absl::StrCat("(guessed) ", FtypeName(GuessFtype(file)));
  return absl::StrCat(arch, " ", size, " ", type);
}

std::string HostCpuDescription() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l = line;
    if (!absl::ConsumePrefix(&l, "model name")) continue;
    const size_t colon = l.find(':');
    if (colon == absl::string_view::npos) continue;
    return std::string(absl::StripAsciiWhitespace(l.substr(colon + 1)));
  }
  return "";
}

std::string Rfc3339Now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%FT%TZ", &tm);
  return buf;
}

}  // namespace memra::tools
