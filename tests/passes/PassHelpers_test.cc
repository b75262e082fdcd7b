// The pass helpers: FunctionPass (filter, "changed" ORed over functions, module-level work
// around RunOnFunctions) and the rewrite-pattern driver (erased ops are never visited, even
// when they come after the root; skips and rewrites are counted in their statistics; the
// rewriter's program order and live-op queries; rewrite errors say where).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"
#include "passes/FunctionPass.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

std::unique_ptr<ir::Module> Parse(absl::string_view text) {
  auto m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

int64_t Stat(const Pass& p, absl::string_view name) {
  for (const Statistic* s : p.statistics())
    if (s->name() == name) return s->value();
  ADD_FAILURE() << "no statistic " << name;
  return -1;
}

// Records the functions it ran on; changes only @b; with `globals`, erases unused weights after.
class RecordingPass : public FunctionPass {
 public:
  absl::string_view name() const override { return "recording"; }
  absl::string_view description() const override { return "test"; }
  absl::StatusOr<bool> Run(ir::Module& m) override {
    MEMRA_ASSIGN_OR_RETURN(bool changed, RunOnFunctions(m));
    after_functions_ = seen_.size();
    return changed;
  }
  bool ShouldRunOn(const ir::Function& f) override {
    if (f.name() == "skip") {
      ++skipped_;
      return false;
    }
    return true;
  }
  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override {
    seen_.push_back(f.name());
    return f.name() == "b";
  }
  std::vector<std::string> seen_;
  size_t after_functions_ = 0;
  Statistic skipped_{this, "skipped", "functions filtered out"};
};

constexpr absl::string_view kThreeFunctions = R"(
func @a(%x: f32[4]) -> (f32[4]) {
  return %x
}
func @skip(%x: f32[4]) -> (f32[4]) {
  return %x
}
func @b(%x: f32[4]) -> (f32[4]) {
  return %x
}
)";

TEST(FunctionPass, RunsOnTheSelectedFunctionsInOrderAndOrsChanged) {
  auto m = Parse(kThreeFunctions);
  ASSERT_NE(m, nullptr);
  RecordingPass p;
  auto changed = p.Run(*m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);  // @b changed, @a did not: still true
  EXPECT_EQ(p.seen_, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.after_functions_, 2u);
  EXPECT_EQ(Stat(p, "skipped"), 1);
}

// silu(x) followed by later silu(x): the later ones become the first (a tiny CSE). The partner
// is erased although it comes after the root in the driver's sweep.
struct SiluPair {
  Op* first;
  Op* later;
};

class SiluPairPattern : public RewritePattern<SiluPair> {
 public:
  explicit SiluPairPattern(Pass* pass) : RewritePattern(pass, OpKind::kSilu, "merged", "silus merged") {}
  MatchResult<SiluPair> Match(Op& root, const PatternRewriter& rw) override {
    ++visited_;
    if (root.operand(0)->kind() != ir::Value::Kind::kArgument) return NoMatch();
    for (Op* later : rw.LiveOpsAfter(root, OpKind::kSilu))
      if (later->operand(0) == root.operand(0)) return SiluPair{&root, later};
    return Skip(no_partner_);
  }
  absl::Status Rewrite(const SiluPair& m, PatternRewriter& rw) override {
    if (fail_) {
      // A wrong signature: the builder's error, with the driver's context.
      MEMRA_ASSIGN_OR_RETURN(Op * bad, rw.Create(m.first, OpKind::kAdd, {m.first->operand(0)}));
      (void)bad;
    }
    rw.Replace(m.later->result(0), m.first->result(0));
    rw.Erase(m.later);
    return absl::OkStatus();
  }
  int visited_ = 0;
  bool fail_ = false;

 private:
  Statistic no_partner_{pass(), "no-partner", "silus without a later equal silu"};
};

class SiluPairPass : public PatternPass {
 public:
  SiluPairPass() : pattern_(AddPattern<SiluPairPattern>()) {}
  absl::string_view name() const override { return "silu-pair"; }
  absl::string_view description() const override { return "test"; }
  SiluPairPattern& pattern_;
};

constexpr absl::string_view kSilus = R"(
func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4]) {
  %a = silu(%x) : f32[4]
  %b = silu(%x) : f32[4]
  %c = silu(%y) : f32[4]
  %d = silu(%x) : f32[4]
  %e = silu(%a) : f32[4]
  return %a, %b, %c, %d, %e
}
)";

TEST(RewritePattern, ErasedOpsAreNotVisitedAndOutcomesAreCounted) {
  auto m = Parse(kSilus);
  ASSERT_NE(m, nullptr);
  SiluPairPass p;
  auto changed = p.Run(*m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  // %a merges %b; %c has no partner; %d (after %b was erased) has none either; %e is no
  // candidate. %b is never visited.
  EXPECT_EQ(p.pattern_.visited_, 4);
  EXPECT_EQ(Stat(p, "merged"), 1);
  EXPECT_EQ(Stat(p, "no-partner"), 2);
  // The rewrite statistic comes first, then the pattern's own.
  ASSERT_EQ(p.statistics().size(), 2u);
  EXPECT_EQ(p.statistics()[0]->name(), "merged");
  EXPECT_TRUE(ir::VerifyModule(*m).ok());
  // %a took over %b's uses and, as ReplaceValue does, its name.
  const std::string text = ir::ToText(*m);
  EXPECT_FALSE(absl::StrContains(text, "%a = silu")) << text;
  EXPECT_TRUE(absl::StrContains(text, "return %b, %b, %c, %d, %e")) << text;

  // A second run: %a's later partner %d is found now.
  auto again = p.Run(*m);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  EXPECT_EQ(Stat(p, "merged"), 2);
}

TEST(RewritePattern, RewriteErrorsNameTheFunctionAndTheRoot) {
  auto m = Parse(kSilus);
  ASSERT_NE(m, nullptr);
  SiluPairPass p;
  p.pattern_.fail_ = true;
  auto changed = p.Run(*m);
  ASSERT_FALSE(changed.ok());
  EXPECT_TRUE(absl::StrContains(changed.status().message(), "@f: rewriting %a = silu(%x)")) << changed.status();
  EXPECT_EQ(Stat(p, "merged"), 0);
}

TEST(PatternRewriter, OrderAndLiveOpsTrackErasedAndCreatedOps) {
  auto m = Parse(kSilus);
  ASSERT_NE(m, nullptr);
  ir::Function& f = *m->function("f");
  std::vector<Op*> ops = f.Ops();  // a b c d e return
  PatternRewriter rw(f);
  EXPECT_EQ(rw.Order(ops[0]), 0);
  EXPECT_EQ(rw.Order(ops[3]), 3);
  EXPECT_EQ(rw.LiveOpsAfter(*ops[0], OpKind::kSilu).size(), 4u);
  auto created = rw.Create(ops[2], OpKind::kSilu, {ops[2]->operand(0)});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(rw.Order(*created), -1);  // not in the starting order
  rw.Replace(ops[1]->result(0), ops[0]->result(0));
  rw.Erase(ops[1]);
  EXPECT_EQ(rw.Order(ops[2]), 2);  // indices stay those of the start
  std::vector<Op*> later = rw.LiveOpsAfter(*ops[0], OpKind::kSilu);
  EXPECT_EQ(later, (std::vector<Op*>{ops[2], ops[3], ops[4]}));  // neither erased nor created
  EXPECT_TRUE(rw.LiveOpsAfter(*ops[0], OpKind::kAdd).empty());
}

}  // namespace
}  // namespace memra::passes
