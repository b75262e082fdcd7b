// bucket-shapes: one copy of a token-polymorphic function per token bucket, with the token
// symbol replaced by the bucket's size:
//
//   func @prefill(%tokens: i32[T]) ...   ->   func @prefill(%tokens: i32[T]) ...  (keep-generic)
//                                             func @prefill_t16(%tokens: i32[16]) attributes
//                                                 {bucket = 16, bucket_of = "prefill"} ...
//                                             func @prefill_t32(...) ...
//
// Every value's shape becomes static, which plan-memory (fixed arena offsets) and capture need.
// The CPU runtime runs a call of n tokens as pieces of exactly bucket size, largest first, and
// the remainder below the smallest bucket through the generic function (runtime/Session.cc).
// @decode (T = 1 already) gets {bucket = 1}. Options:
//   ladder      the buckets: "16..4096" (powers of two, the default) or "16:48:64"
//   function    the function to specialize (default "prefill")
//   symbol      the token symbol (default "T")
//   cap-context skip buckets larger than the module's n_ctx attribute (default true)
//   keep-generic keep the symbolic function beside its buckets (default true: the CPU runs a
//                prompt's remainder below the smallest bucket through it in one call; a CUDA
//                plan pads to the bucket instead)
#include "absl/strings/str_cat.h"
#include "ir/Module.h"
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

class BucketShapesPass : public Pass {
 public:
  absl::string_view name() const override { return "bucket-shapes"; }
  absl::string_view description() const override {
    return "Clones @prefill per token bucket with T substituted (@prefill_t16, ...)";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    MEMRA_ASSIGN_OR_RETURN(std::vector<int64_t> ladder, ParseLadder(*ladder_));
    if (symbol_.value().empty()) return absl::InvalidArgumentError("bucket-shapes: option 'symbol' is empty");
    // A function named on purpose must exist (the default's absence means already bucketed).
    if (!function_.is_default() && m.function(*function_) == nullptr)
      return absl::NotFoundError(absl::StrCat("bucket-shapes: no function @", *function_, " (option 'function')"));
    bool changed = false;
    if (ir::Function* decode = m.function("decode"); decode && !decode->attrs().Has("bucket")) {
      decode->attrs().Set("bucket", int64_t{1});
      changed = true;
    }
    ir::Function* f = m.function(*function_);
    if (f == nullptr) return changed;  // nothing to specialize (already bucketed, or no prefill)
    const int64_t n_ctx = m.attrs().I64Or("n_ctx", 0);
    int64_t created = 0;
    for (int64_t bucket : ladder) {
      if (*cap_context_ && n_ctx > 0 && bucket > n_ctx) {
        ++skipped_;
        continue;
      }
      const std::string name = absl::StrCat(*function_, "_t", bucket);
      if (m.function(name) != nullptr)
        return absl::AlreadyExistsError(absl::StrCat("bucket-shapes: @", name, " already exists"));
      ir::Function* b = f->CloneInto(&m, name);
      b->SubstituteSymbols({{*symbol_, bucket}});
      b->attrs().Set("bucket", bucket);
      b->attrs().Set("bucket_of", *function_);
      ++buckets_;
      ++created;
      changed = true;
    }
    if (!*keep_generic_ && created > 0) {
      m.EraseFunction(*function_);
      changed = true;
    }
    return changed;
  }

 private:
  Option<std::string> ladder_{this, "ladder", "token buckets: lo..hi (powers of two) or a:b:c", "16..4096"};
  Option<std::string> function_{this, "function", "function to specialize", "prefill"};
  Option<std::string> symbol_{this, "symbol", "token symbol to substitute", "T"};
  Option<bool> cap_context_{this, "cap-context", "skip buckets larger than the module's n_ctx", true};
  Option<bool> keep_generic_{this, "keep-generic", "keep the symbolic function too", true};
  Statistic buckets_{this, "buckets", "bucket functions created"};
  Statistic skipped_{this, "skipped-over-context", "buckets larger than the context length"};
};

}  // namespace

std::unique_ptr<Pass> CreateBucketShapesPass() { return std::make_unique<BucketShapesPass>(); }

}  // namespace memra::passes
