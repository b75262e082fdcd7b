#include "tests/FixtureLogits.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "kernels/cpu/Sampling.h"
#include "tests/TestUtil.h"

namespace memra::testing {

std::string FixtureModelPath(const std::string& model) { return SharedPath("fixtures/models/" + model + ".gguf"); }

std::string FixtureRefPath(const std::string& model, const std::string& file) {
  return SharedPath("fixtures/ref/" + model + "/" + file);
}

LogitsDiff CompareLogits(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
  LogitsDiff d;
  double ss = 0, sd = 0;
  const size_t v = static_cast<size_t>(vocab);
  const size_t rows = std::min(got.size(), ref.size()) / v;
  for (size_t r = 0; r < rows; ++r) {
    double rs = 0, rd = 0;
    for (size_t i = 0; i < v; ++i) {
      const double e = double(got[r * v + i]) - ref[r * v + i];
      d.max_abs = std::max(d.max_abs, std::fabs(e));
      rd += e * e;
      rs += double(ref[r * v + i]) * ref[r * v + i];
    }
    ss += rs;
    sd += rd;
    d.max_row_nmse = std::max(d.max_row_nmse, rd / std::max(rs, 1e-30));
    d.argmax_equal += kernels::cpu::Argmax(&got[r * v], vocab) == kernels::cpu::Argmax(&ref[r * v], vocab);
  }
  d.rms_rel = std::sqrt(sd / std::max(ss, 1e-30));
  return d;
}

std::string FixtureParamName(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

void ExpectChunkingAndDecodeInvariant(LoadedModel& model, absl::Span<const int32_t> prompt, int64_t vocab, double tol) {
  model.exec->ResetState();
  auto one = model.Prefill(prompt);
  ASSERT_TRUE(one.ok()) << one.status();
  for (int64_t chunk : {5, 7, 13}) {
    model.exec->ResetState();
    auto c = model.PrefillChunked(prompt, chunk);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->size(), one->size()) << "chunk " << chunk;
    EXPECT_LE(CompareLogits(*c, *one, vocab).max_abs, tol) << "chunk " << chunk;
  }
  model.exec->ResetState();
  auto head = model.Prefill(prompt.subspan(0, prompt.size() - 1));
  ASSERT_TRUE(head.ok()) << head.status();
  auto last = model.Decode(prompt.back());
  ASSERT_TRUE(last.ok()) << last.status();
  const std::vector<float> want(one->end() - vocab, one->end());
  ASSERT_EQ(last->size(), want.size());
  EXPECT_LE(CompareLogits(*last, want, vocab).max_abs, tol);
}

}  // namespace memra::testing
