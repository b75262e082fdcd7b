#include "passes/Pipelines.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace memra::passes {

std::string PipelineForArch(absl::string_view arch, absl::string_view weights, absl::string_view decode_class) {
  if (arch == "cpu" || arch.empty()) return std::string(kDefaultPipeline);
  std::vector<std::string> opts;
  if (arch != "sm_90") opts.push_back(absl::StrCat("arch=", arch));
  if (!weights.empty() && weights != "blocks") opts.push_back(absl::StrCat("weights=", weights));
  if (!decode_class.empty() && decode_class != "bucket") opts.push_back(absl::StrCat("decode-class=", decode_class));
  if (opts.empty()) return std::string(kCudaPipeline);
  return absl::StrReplaceAll(kCudaPipeline,
                             {{"select-kernels", absl::StrCat("select-kernels{", absl::StrJoin(opts, " "), "}")}});
}

std::string PipelineForTarget(absl::string_view arch, int sm_count, absl::string_view weights,
                              absl::string_view decode_class) {
  if (arch == "cpu" || arch.empty()) return std::string(kDefaultPipeline);
  std::string opts = absl::StrCat("arch=", arch, " sm-count=", sm_count);
  if (!weights.empty() && weights != "blocks") absl::StrAppend(&opts, " weights=", weights);
  if (!decode_class.empty() && decode_class != "bucket") absl::StrAppend(&opts, " decode-class=", decode_class);
  return absl::StrReplaceAll(kCudaPipeline, {{"select-kernels", absl::StrCat("select-kernels{", opts, "}")}});
}

std::string WithTensorParallel(absl::string_view pipeline, int64_t tp) {
  if (tp <= 1 || absl::StrContains(pipeline, "shard-tensor-parallel")) return std::string(pipeline);
  return absl::StrCat("shard-tensor-parallel{tp=", tp, "}", pipeline.empty() ? "" : ",", pipeline);
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

std::string StepPipeline(absl::string_view pipeline, absl::string_view ladder) {
  const std::string l = absl::StrReplaceAll(ladder, {{",", ":"}, {" ", ""}});
  // After the buckets, fuse-delta-net-inputs once more: the per-slot scans of the small (decode)
  // buckets take their q/k norms.
  return absl::StrReplaceAll(
      pipeline, {{"bucket-shapes", absl::StrCat("bucket-shapes{function=step ladder=", l,
                                                " keep-generic=false cap-context=false},fuse-delta-net-inputs")}});
}

}  // namespace memra::passes
