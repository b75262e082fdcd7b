// memra bench's report (tools/BenchReport.h) in llama-bench's formats, from fixed records: the md
// table's alignment and columns, the csv header (llama-bench's field list, spelled out here), the
// json array and the jsonl lines with their typed fields, the statistics and the model type.
#include "tools/BenchReport.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "tests/JsonLite.h"
#include "tests/TestUtil.h"

namespace memra::tools {
namespace {

using testing::Json;

// llama-bench's test::get_fields(), as its csv header prints them.
constexpr char kLlamaBenchFields[] =
    "build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,"
    "model_n_params,n_batch,n_ubatch,n_threads,cpu_mask,cpu_strict,poll,type_k,type_v,n_gpu_layers,"
    "n_cpu_moe,split_mode,main_gpu,no_kv_offload,flash_attn,devices,tensor_split,tensor_buft_overrides,"
    "load_mode,embeddings,no_op_offload,no_host,fit_target,fit_min_ctx,n_prompt,n_gen,n_depth,test_time,"
    "avg_ns,stddev_ns,avg_ts,stddev_ts";

BenchRecord Base(const std::string& backend) {
  BenchRecord r;
  r.build_commit = "memra 0.1.0";
  r.cpu_info = "Test CPU \"quoted\", with comma";
  r.gpu_info = backend == "CUDA" ? "NVIDIA H200" : "";
  r.backends = backend;
  r.model_filename = "models/x.gguf";
  r.model_type = "qwen35 9B Q8_0";
  r.model_size = 9498000000ull;
  r.model_n_params = 8950000000ull;
  r.n_batch = r.n_ubatch = 4096;
  r.n_threads = backend == "CUDA" ? 1 : 16;
  r.type_k = r.type_v = "f32";
  r.n_gpu_layers = backend == "CUDA" ? -1 : 0;
  r.flash_attn = backend == "CUDA" ? 1 : 0;
  r.devices = backend == "CUDA" ? "CUDA0" : "none";
  r.test_time = "2026-12-01T17:48:06Z";
  return r;
}

std::vector<BenchRecord> Records(const std::string& backend) {
  BenchRecord pp = Base(backend);
  pp.n_prompt = 512;
  pp.samples_ns = {100000000, 125000000};  // 5120 and 4096 t/s
  BenchRecord tg = Base(backend);
  tg.n_gen = 128;
  tg.n_depth = 4096;
  tg.samples_ns = {1000000000, 1000000000, 1000000000};  // 128 t/s, no spread
  return {pp, tg};
}

// Characters on screen (UTF-8 code points).
size_t Width(absl::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> TableLines(const std::string& md) {
  std::vector<std::string> out;
  for (absl::string_view l : absl::StrSplit(md, '\n'))
    if (absl::StartsWith(l, "|")) out.emplace_back(l);
  return out;
}

// The cells of a table line, with their padding.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> c = absl::StrSplit(line, '|');
  return std::vector<std::string>(c.begin() + 1, c.end() - 1);
}

TEST(BenchReport, MarkdownRowsAlignAndNumbersAreRightAligned) {
  for (const std::string backend : {"CPU", "CUDA"}) {
    SCOPED_TRACE(backend);
    std::vector<BenchRecord> recs = Records(backend);
    recs.push_back(recs[1]);
    recs.back().model_type = "qwen35moe 35B.A3B Q4_K - Medium (a long one)";  // wider than llama's 30
    recs.back().samples_ns = {1};                                             // 1.28e11 t/s: a wide number
    const std::string md = RenderBench(BenchFormat::kMarkdown, recs);
    const std::vector<std::string> lines = TableLines(md);
    ASSERT_EQ(lines.size(), 2 + recs.size()) << md;
    for (const std::string& l : lines) EXPECT_EQ(Width(l), Width(lines[0])) << md;
    std::vector<std::string> header = Cells(lines[0]);
    std::vector<std::string> names;
    for (const std::string& h : header) names.emplace_back(absl::StripAsciiWhitespace(h));
    const std::vector<std::string> expected = {
        "model", "size", "params", "backend", backend == "CPU" ? "threads" : "ngl", "test", "t/s"};
    EXPECT_EQ(names, expected);
    // Every column lines up: the same cell widths on every line.
    for (const std::string& l : lines) {
      const std::vector<std::string> cells = Cells(l);
      ASSERT_EQ(cells.size(), header.size()) << l;
      for (size_t i = 0; i < cells.size(); ++i) EXPECT_EQ(Width(cells[i]), Width(header[i])) << l;
    }
    // The rule: ":" closes the right-aligned (numeric) columns, as llama-bench's.
    const std::vector<std::string> rule = Cells(lines[1]);
    for (size_t i = 0; i < rule.size(); ++i) {
      const bool right = i != 0 && i != 3;  // model and backend are text
      EXPECT_EQ(rule[i][rule[i].size() - 2], right ? ':' : '-') << lines[1];
    }
    // Data rows: numbers end at the right edge of their cell, text starts at the left.
    for (size_t row = 2; row < lines.size(); ++row) {
      const std::vector<std::string> cells = Cells(lines[row]);
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string& c = cells[i];
        ASSERT_GE(c.size(), 3u);
        const bool right = i != 0 && i != 3;
        if (right) {
          EXPECT_NE(c[c.size() - 2], ' ') << "cell " << i << " of " << lines[row];
        } else {
          EXPECT_NE(c[1], ' ') << "cell " << i << " of " << lines[row];
        }
      }
    }
    EXPECT_NE(lines[2].find("| qwen35 9B Q8_0 "), std::string::npos) << md;
    EXPECT_NE(lines[2].find(" 8.85 GiB |"), std::string::npos) << md;
    EXPECT_NE(lines[2].find(" 8.95 B |"), std::string::npos) << md;
    EXPECT_NE(lines[2].find(" pp512 |"), std::string::npos) << md;
    EXPECT_NE(lines[2].find(" 4608.00 ± 724.08 |"), std::string::npos) << md;
    EXPECT_NE(lines[3].find(" tg128 @ d4096 |"), std::string::npos) << md;
    EXPECT_NE(lines[3].find(" 128.00 ± 0.00 |"), std::string::npos) << md;
    EXPECT_NE(lines[2].find(backend == "CPU" ? " 16 |" : " -1 |"), std::string::npos) << md;
    EXPECT_NE(md.find("\nbuild: memra 0.1.0 (0)\n"), std::string::npos) << md;
  }
}

TEST(BenchReport, MarkdownKeepsLlamaBenchWidthsWhenValuesFit) {
  const std::string md = RenderBench(BenchFormat::kMarkdown, Records("CPU"));
  const std::vector<std::string> lines = TableLines(md);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "| model                          |       size |     params | backend    | threads |            test |"
            "                  t/s |");
  EXPECT_EQ(lines[1],
            "| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: |"
            " -------------------: |");
}

// A split run (--tp) adds a tp column after threads / ngl; unsplit tables keep llama-bench's.
TEST(BenchReport, MarkdownShowsTheRanksOfASplitRun) {
  std::vector<BenchRecord> records = Records("CPU");
  for (BenchRecord& r : records) r.tp = 2;
  const std::vector<std::string> lines = TableLines(RenderBench(BenchFormat::kMarkdown, records));
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(Cells(lines[0])[5], " tp ");
  EXPECT_EQ(Cells(lines[2])[5], "  2 ");
}

// memra bench --tp 1,2,4: each test against the same test at the first split; efficiency is the
// speedup over the ranks' ratio; a test the baseline did not run is left out.
TEST(BenchReport, TpScalingAgainstTheFirstSplit) {
  std::vector<BenchRecord> records;
  for (int64_t tp : {1, 2, 4}) {
    BenchRecord r = Base("CUDA");
    r.tp = tp;
    r.n_gen = 128;
    r.samples_ns = {static_cast<uint64_t>(1000000000 / (tp == 1 ? 1.0 : tp == 2 ? 1.6 : 3.2))};
    records.push_back(r);
  }
  BenchRecord lone = Base("CUDA");
  lone.tp = 2;
  lone.n_prompt = 4096;
  lone.samples_ns = {1000000000};
  records.push_back(lone);
  const std::vector<std::string> lines = TableLines(RenderTpScaling(records));
  ASSERT_EQ(lines.size(), 5u) << RenderTpScaling(records);
  EXPECT_EQ(lines[0], "| test                 |  tp |            t/s |  speedup | efficiency |");
  EXPECT_EQ(lines[2], "| tg128                |   1 |         128.00 |    1.00x |     100.0% |");
  EXPECT_EQ(lines[3], "| tg128                |   2 |         204.80 |    1.60x |      80.0% |");
  EXPECT_EQ(lines[4], "| tg128                |   4 |         409.60 |    3.20x |      80.0% |");
  EXPECT_EQ(RenderTpScaling({}), "");
}

TEST(BenchReport, CsvHeaderIsLlamaBenchsFieldList) {
  const std::string csv = RenderBench(BenchFormat::kCsv, Records("CUDA"));
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << csv;
  EXPECT_EQ(lines[0], kLlamaBenchFields);
  EXPECT_EQ(absl::StrJoin(BenchFieldNames(), ","), kLlamaBenchFields);
  // Every value quoted, quotes doubled: "a ""b"", c" is one field.
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> fields;
    std::string cur;
    bool quoted = false;
    const std::string& l = lines[i];
    for (size_t k = 0; k < l.size(); ++k) {
      if (quoted && l[k] == '"' && k + 1 < l.size() && l[k + 1] == '"') {
        cur += '"', ++k;
      } else if (l[k] == '"') {
        quoted = !quoted;
      } else if (l[k] == ',' && !quoted) {
        fields.push_back(cur), cur.clear();
      } else {
        cur += l[k];
      }
    }
    fields.push_back(cur);
    ASSERT_EQ(fields.size(), BenchFieldNames().size()) << l;
    EXPECT_EQ(fields[2], "Test CPU \"quoted\", with comma");
    EXPECT_EQ(fields[4], "CUDA");
    EXPECT_EQ(fields[17], "-1");  // n_gpu_layers
  }
  EXPECT_NE(lines[1].find(",\"512\",\"0\",\"0\",\"2026-12-01T17:48:06Z\",\"112500000\",\"17677670\","),
            std::string::npos)
      << lines[1];
}

// The fields of one json object: llama-bench's, in order, typed, then the two sample arrays.
void CheckObject(const Json& o, const BenchRecord& r) {
  ASSERT_TRUE(o.is_object());
  const Json::Object& m = o.object();
  ASSERT_EQ(m.size(), BenchFieldNames().size() + 2);
  for (size_t i = 0; i < BenchFieldNames().size(); ++i) EXPECT_EQ(m[i].first, BenchFieldNames()[i]);
  EXPECT_EQ(m[m.size() - 2].first, "samples_ns");
  EXPECT_EQ(m.back().first, "samples_ts");
  EXPECT_TRUE(o["build_commit"].is_string());
  EXPECT_EQ(o["build_number"].int_value(), 0);
  EXPECT_EQ(o["cpu_info"].string_value(), r.cpu_info);
  EXPECT_EQ(o["model_type"].string_value(), r.model_type);
  EXPECT_TRUE(o["model_size"].is_int());
  EXPECT_EQ(o["model_size"].int_value(), static_cast<int64_t>(r.model_size));
  EXPECT_EQ(o["model_n_params"].int_value(), static_cast<int64_t>(r.model_n_params));
  EXPECT_TRUE(o["cpu_strict"].is_bool());
  EXPECT_FALSE(o["cpu_strict"].bool_value());
  EXPECT_TRUE(o["no_kv_offload"].is_bool());
  EXPECT_TRUE(o["embeddings"].is_bool());
  EXPECT_TRUE(o["no_host"].is_bool());
  EXPECT_TRUE(o["flash_attn"].is_int());
  EXPECT_TRUE(o["no_op_offload"].is_int());
  EXPECT_EQ(o["n_prompt"].int_value(), r.n_prompt);
  EXPECT_EQ(o["n_gen"].int_value(), r.n_gen);
  EXPECT_EQ(o["n_depth"].int_value(), r.n_depth);
  EXPECT_EQ(o["test_time"].string_value(), r.test_time);
  EXPECT_EQ(o["avg_ns"].int_value(), static_cast<int64_t>(r.avg_ns()));
  EXPECT_TRUE(o["avg_ts"].is_number());
  EXPECT_NEAR(o["avg_ts"].number_value(), r.avg_ts(), 1e-3);
  EXPECT_NEAR(o["stddev_ts"].number_value(), r.stddev_ts(), 1e-3);
  ASSERT_TRUE(o["samples_ns"].is_array());
  ASSERT_EQ(o["samples_ns"].size(), r.samples_ns.size());
  ASSERT_EQ(o["samples_ts"].size(), r.samples_ns.size());
  for (size_t i = 0; i < r.samples_ns.size(); ++i) {
    EXPECT_EQ(o["samples_ns"][i].int_value(), static_cast<int64_t>(r.samples_ns[i]));
    EXPECT_NEAR(o["samples_ts"][i].number_value(), r.samples_ts()[i], 1e-3 * r.samples_ts()[i]);
  }
}

TEST(BenchReport, JsonIsAnArrayOfTypedObjects) {
  const std::vector<BenchRecord> recs = Records("CPU");
  const std::string text = RenderBench(BenchFormat::kJson, recs);
  auto j = Json::Parse(text);
  ASSERT_TRUE(j.ok()) << j.status() << "\n" << text;
  ASSERT_TRUE(j->is_array());
  ASSERT_EQ(j->size(), recs.size());
  for (size_t i = 0; i < recs.size(); ++i) CheckObject((*j)[i], recs[i]);
  EXPECT_EQ((*j)[size_t{0}]["samples_ts"][size_t{0}].number_value(), 5120);
  auto empty = Json::Parse(RenderBench(BenchFormat::kJson, {}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->is_array());
  EXPECT_EQ(empty->size(), 0u);
}

TEST(BenchReport, JsonlIsOneObjectPerLine) {
  const std::vector<BenchRecord> recs = Records("CUDA");
  const std::string text = RenderBench(BenchFormat::kJsonl, recs);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), recs.size()) << text;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto j = Json::Parse(lines[i]);
    ASSERT_TRUE(j.ok()) << j.status() << "\n" << lines[i];
    CheckObject(*j, recs[i]);
    EXPECT_EQ((*j)["backends"].string_value(), "CUDA");
    EXPECT_EQ((*j)["n_gpu_layers"].int_value(), -1);
  }
}

TEST(BenchReport, StatisticsAreLlamaBenchs) {
  BenchRecord r;
  r.n_prompt = 512;
  r.samples_ns = {100000000, 125000000};
  EXPECT_EQ(r.avg_ns(), 112500000u);
  EXPECT_EQ(r.stddev_ns(), 17677670u);  // sqrt(((-12.5e6)^2 + (12.5e6)^2) / 1)
  ASSERT_EQ(r.samples_ts().size(), 2u);
  EXPECT_DOUBLE_EQ(r.samples_ts()[0], 5120.0);
  EXPECT_DOUBLE_EQ(r.samples_ts()[1], 4096.0);
  EXPECT_DOUBLE_EQ(r.avg_ts(), 4608.0);
  EXPECT_NEAR(r.stddev_ts(), 724.077, 1e-3);
  EXPECT_EQ(r.TestName(), "pp512");
  r.n_gen = 128;
  EXPECT_EQ(r.TestName(), "pp512+tg128");
  r.n_prompt = 0;
  r.n_depth = 16;
  EXPECT_EQ(r.TestName(), "tg128 @ d16");
  BenchRecord one;
  one.n_gen = 4;
  one.samples_ns = {0};  // a zero-length sample stays finite (the JSON has no inf)
  EXPECT_EQ(one.stddev_ts(), 0);
  EXPECT_TRUE(std::isfinite(one.avg_ts()));
}

// llama-batched-bench's printf layout, byte for byte (its README's sample row), and its -jsonl keys.
TEST(BenchReport, BatchedBenchTableIsLlamaBatchedBenchs) {
  BatchedBenchRow r;
  r.pp = 128;
  r.tg = 128;
  r.b = 2;
  r.t_pp = 0.198;
  r.t_tg = 5.029;
  r.n_kv_max = 2048;
  r.n_batch = 256;
  r.n_ubatch = 4096;
  r.n_threads = 8;
  EXPECT_EQ(r.n_kv(), 512);
  const std::vector<BatchedBenchRow> rows = {r};
  EXPECT_EQ(RenderBatchedBench(BenchFormat::kMarkdown, rows),
            "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
            "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n"
            "|   128 |    128 |    2 |    512 |    0.198 |  1292.93 |    5.029 |    50.90 |    5.227 |    97.95 |\n");
  EXPECT_EQ(RenderBatchedBench(BenchFormat::kJsonl, rows),
            "{\"n_kv_max\": 2048, \"n_batch\": 256, \"n_ubatch\": 4096, \"flash_attn\": 0, \"is_pp_shared\": 0, "
            "\"n_gpu_layers\": 0, \"n_threads\": 8, \"n_threads_batch\": 8, \"pp\": 128, \"tg\": 128, \"pl\": 2, "
            "\"n_kv\": 512, \"t_pp\": 0.198000, \"speed_pp\": 1292.929293, \"t_tg\": 5.029000, \"speed_tg\": "
            "50.904752, \"t\": 5.227000, \"speed\": 97.952937}\n");
  BatchedBenchRow zero = r;
  zero.tg = 0;
  zero.t_tg = 0;
  EXPECT_EQ(zero.speed_tg(), 0.0);  // no decode steps: 0, not inf
}

TEST(BenchReport, OutputFormatNames) {
  EXPECT_EQ(*ParseBenchFormat("md"), BenchFormat::kMarkdown);
  EXPECT_EQ(*ParseBenchFormat("json"), BenchFormat::kJson);
  EXPECT_EQ(*ParseBenchFormat("jsonl"), BenchFormat::kJsonl);
  EXPECT_EQ(*ParseBenchFormat("csv"), BenchFormat::kCsv);
  auto bad = ParseBenchFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "-o xml: expected md, json, jsonl or csv");
}

TEST(BenchReport, ModelTypeFromTheGguf) {
  for (auto [file, type] : {std::pair{"models/qwen35-tiny-f32.gguf", "qwen35 2.4M all F32"},
                            std::pair{"models/qwen35-tiny-q8_0.gguf", "qwen35 2.4M Q8_0"}}) {
    auto f = gguf::GgufFile::Open(testing::TestDataPath(file));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(ModelTypeName(**f), type);
  }
}

}  // namespace
}  // namespace memra::tools
