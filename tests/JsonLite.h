// JSON for test fixtures: the library's small JSON value (frontends/tokenizer/Json.h) plus
// readers for .json and .jsonl files. Header-only so any *_test.cc can include it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "frontends/tokenizer/Json.h"
#include "tests/TestUtil.h"

namespace memra::testing {

using Json = ::memra::tokenizer::Json;

inline absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  auto j = Json::Parse(absl::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  if (!j.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", j.status().message()));
  return j;
}

// One JSON value per non-empty line.
inline absl::StatusOr<std::vector<Json>> ReadJsonLines(const std::string& path) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  std::vector<Json> out;
  absl::string_view all(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  size_t line_no = 0;
  while (!all.empty()) {
    ++line_no;
    const size_t nl = all.find('\n');
    absl::string_view line = all.substr(0, nl);
    all = nl == absl::string_view::npos ? absl::string_view() : all.substr(nl + 1);
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    auto j = Json::Parse(line);
    if (!j.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", j.status().message()));
    out.push_back(*std::move(j));
  }
  return out;
}

// Integer array field as int32 ids.
inline std::vector<int32_t> JsonIds(const Json& arr) {
  std::vector<int32_t> ids;
  for (const Json& v : arr.array()) ids.push_back(static_cast<int32_t>(v.int_value()));
  return ids;
}

}  // namespace memra::testing
