// The prefill chunk schedule, with the exact shapes the seed engine's tests pin
// (design/seed/part5.md §3).
#include "runtime/PrefillSchedule.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace memra::runtime {
namespace {

std::vector<int64_t> Sizes(const std::vector<TokenRange>& r) {
  std::vector<int64_t> s;
  for (auto [a, b] : r) s.push_back(b - a);
  return s;
}
int64_t AutoChunk(int64_t t) { return std::min(std::max((t + 7) / 8, int64_t{128}), int64_t{4096}); }

void ExpectCovers(const std::vector<TokenRange>& r, int64_t t) {
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.front().first, 0);
  EXPECT_EQ(r.back().second, t);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_LT(r[i].first, r[i].second);
    if (i) {
      EXPECT_EQ(r[i].first, r[i - 1].second);
    }
  }
}

TEST(PrefillScheduleTest, FixedScheduleRetainsMeasuredGeometry) {
  EXPECT_EQ(Sizes(FixedPrefillChunks(461, 128)), (std::vector<int64_t>{128, 128, 128, 77}));
  EXPECT_EQ(Sizes(FixedPrefillChunks(1833, 230)), (std::vector<int64_t>{230, 230, 230, 230, 230, 230, 230, 223}));
  EXPECT_EQ(Sizes(FixedPrefillChunks(4096, 512)), std::vector<int64_t>(8, 512));
  EXPECT_EQ(Sizes(FixedPrefillChunks(8200, 4096, /*ring_on=*/true)), (std::vector<int64_t>{4096, 4088, 16}));
  EXPECT_EQ(Sizes(FixedPrefillChunks(4100, 4096, /*ring_on=*/false)), (std::vector<int64_t>{4100}));
  EXPECT_EQ(Sizes(FixedPrefillChunks(48, 16)), (std::vector<int64_t>{16, 16, 16}));
  EXPECT_EQ(Sizes(FixedPrefillChunks(48, 0)), (std::vector<int64_t>{48}));
  EXPECT_EQ(Sizes(FixedPrefillChunks(40, 16)), (std::vector<int64_t>{16, 24}));  // tail 8 merges
}

TEST(PrefillScheduleTest, DynamicScheduleMatchesRegisteredShapes) {
  auto dyn = [](int64_t t) {
    const int64_t c = AutoChunk(t);
    return Sizes(DynamicPrefillChunks(t, c, FixedPrefillChunks(t, c)));
  };
  EXPECT_EQ(dyn(461), (std::vector<int64_t>{64, 141, 132, 124}));
  EXPECT_EQ(dyn(1833), (std::vector<int64_t>{115, 269, 260, 252, 244, 237, 231, 225}));
  EXPECT_EQ(dyn(4096), (std::vector<int64_t>{256, 602, 580, 563, 545, 531, 516, 503}));
}

TEST(PrefillScheduleTest, DynamicScheduleCoversExactlyAndShrinksAfterFill) {
  for (int64_t t = 256; t <= 8192; ++t) {
    const int64_t c = AutoChunk(t);
    const auto fixed = FixedPrefillChunks(t, c);
    const auto d = DynamicPrefillChunks(t, c, fixed);
    ASSERT_EQ(d.size(), fixed.size()) << t;
    ExpectCovers(d, t);
    const auto s = Sizes(d);
    for (int64_t x : s) ASSERT_GE(x, 16) << t;
    if (s.size() >= 3) {
      ASSERT_LT(s[0], s[1]) << t;
      for (size_t i = 2; i < s.size(); ++i) ASSERT_LE(s[i], s[i - 1]) << t;
    }
  }
}

TEST(PrefillScheduleTest, AutoRangesAlignToTheGdnGrid) {
  const int64_t t = 9510, c = 32, fill = AutoChunk(t);
  ASSERT_EQ(fill, 1189);
  const auto fixed = FixedPrefillChunks(t, fill);
  EXPECT_EQ(Sizes(fixed), (std::vector<int64_t>{1189, 1189, 1189, 1189, 1189, 1189, 1189, 1187}));
  const auto dyn = DynamicPrefillChunks(t, fill, fixed);
  EXPECT_EQ(Sizes(dyn), (std::vector<int64_t>{595, 1396, 1348, 1306, 1267, 1231, 1199, 1168}));
  for (const auto* r : {&fixed, &dyn}) {
    bool off_grid = false;
    for (size_t i = 0; i + 1 < r->size(); ++i) off_grid |= (*r)[i].second % c != 0;
    EXPECT_TRUE(off_grid);
    const auto a = AlignPrefillChunksToGrid(*r, t, c);
    ExpectCovers(a, t);
    ASSERT_EQ(a.size(), r->size());
    for (size_t i = 0; i + 1 < a.size(); ++i) {
      EXPECT_EQ(a[i].second % c, 0);
      EXPECT_LE(a[i].second, (*r)[i].second);
      EXPECT_LT((*r)[i].second - a[i].second, c);
    }
  }
  auto ends = [](const std::vector<TokenRange>& r) {
    std::vector<int64_t> e;
    for (auto [a, b] : r) e.push_back(b);
    return e;
  };
  EXPECT_EQ(ends(AlignPrefillChunksToGrid(fixed, t, c)),
            (std::vector<int64_t>{1184, 2368, 3552, 4736, 5920, 7104, 8320, 9510}));
  EXPECT_EQ(ends(AlignPrefillChunksToGrid(dyn, t, c)),
            (std::vector<int64_t>{576, 1984, 3328, 4640, 5888, 7136, 8320, 9510}));
  // Merge and no-op cases.
  EXPECT_EQ(AlignPrefillChunksToGrid({{0, 33}, {33, 40}, {40, 200}}, 200, 32),
            (std::vector<TokenRange>{{0, 32}, {32, 200}}));
  EXPECT_EQ(AlignPrefillChunksToGrid({{0, 200}}, 200, 32), (std::vector<TokenRange>{{0, 200}}));
  const std::vector<TokenRange> tight{{0, 33}, {33, 40}, {40, 200}};
  EXPECT_EQ(AlignPrefillChunksToGrid(tight, 200, 0), tight);
  const std::vector<TokenRange> on_grid{{0, 128}, {128, 256}, {256, 300}};
  EXPECT_EQ(AlignPrefillChunksToGrid(on_grid, 300, 32), on_grid);
}

}  // namespace
}  // namespace memra::runtime
