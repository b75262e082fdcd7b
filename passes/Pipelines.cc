#include "passes/Pipelines.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace memra::passes {

std::string PipelineForArch(absl::string_view arch) {
  if (arch == "cpu" || arch.empty()) return std::string(kDefaultPipeline);
  if (arch == "sm_90") return std::string(kCudaPipeline);
  return absl::StrReplaceAll(kCudaPipeline, {{"select-kernels", absl::StrCat("select-kernels{arch=", arch, "}")}});
}

std::string PipelineForTarget(absl::string_view arch, int sm_count) {
  if (arch == "cpu" || arch.empty()) return std::string(kDefaultPipeline);
  return absl::StrReplaceAll(
      kCudaPipeline, {{"select-kernels", absl::StrCat("select-kernels{arch=", arch, " sm-count=", sm_count, "}")}});
}

std::string WithBucketLadder(absl::string_view pipeline, absl::string_view buckets) {
  std::string p(pipeline);
  if (buckets.empty()) return p;
  // Pipeline option values cannot hold ','; the ladder takes ':' as well.
  const std::string ladder = absl::StrReplaceAll(buckets, {{",", ":"}, {" ", ""}});
  const std::string pass = "bucket-shapes";
  size_t pos = p.find(pass);
  if (pos == std::string::npos) return p;
  size_t end = pos + pass.size();
  if (end < p.size() && p[end] == '{') {
    p.insert(end + 1, absl::StrCat("ladder=", ladder, " "));
  } else {
    p.insert(end, absl::StrCat("{ladder=", ladder, "}"));
  }
  return p;
}

}  // namespace memra::passes
