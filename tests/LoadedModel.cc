#include "tests/LoadedModel.h"

#include <algorithm>

#include "frontends/ModelFamily.h"
#include "kernels/cpu/Sampling.h"

namespace memra::testing {

absl::StatusOr<std::vector<float>> LoadedModel::Call(absl::string_view fn, absl::Span<const int32_t> tokens) {
  std::vector<runtime::HostTensor> args;
  args.push_back(runtime::HostTensor::FromI32(std::vector<int32_t>(tokens.begin(), tokens.end()),
                                              {static_cast<int64_t>(tokens.size())}));
  auto out = exec->Run(fn, std::move(args));
  if (!out.ok()) return out.status();
  const runtime::HostTensor& t = (*out)[0];
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

absl::StatusOr<std::vector<float>> LoadedModel::PrefillChunked(absl::Span<const int32_t> tokens, int64_t chunk) {
  std::vector<float> all;
  for (size_t s = 0; s < tokens.size(); s += chunk) {
    auto part = Prefill(tokens.subspan(s, std::min<size_t>(chunk, tokens.size() - s)));
    if (!part.ok()) return part.status();
    all.insert(all.end(), part->begin(), part->end());
  }
  return all;
}

absl::StatusOr<std::vector<int32_t>> LoadedModel::Greedy(absl::Span<const int32_t> prompt, int64_t n) {
  const int64_t vocab = module->attrs().I64Or("n_vocab", 0);
  if (vocab <= 0) return absl::FailedPreconditionError("the module records no n_vocab");
  auto logits = Prefill(prompt);
  if (!logits.ok()) return logits.status();
  std::vector<int32_t> out;
  int32_t next = kernels::cpu::Argmax(logits->data() + logits->size() - vocab, vocab);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(next);
    auto step = Decode(next);
    if (!step.ok()) return step.status();
    next = kernels::cpu::Argmax(step->data(), vocab);
  }
  return out;
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& path, const frontends::LowerOptions& lo,
                                      runtime::WeightMode mode) {
  LoadedModel l;
  auto f = gguf::GgufFile::Open(path);
  if (!f.ok()) return f.status();
  l.file = std::move(*f);
  auto m = frontends::LowerModel(*l.file, lo);
  if (!m.ok()) return m.status();
  l.module = std::move(*m);
  runtime::CpuExecutorOptions eo;
  eo.weight_mode = mode;
  auto e = runtime::CpuExecutor::Create(*l.module, *l.file, eo);
  if (!e.ok()) return e.status();
  l.exec = std::move(*e);
  return l;
}

}  // namespace memra::testing
