// gguf::ParseLayerTensorName: `blk.<N>.<rest>` split into the layer and the rest; names of no
// layer, or whose N is not a plain non-negative decimal number, are not layer names.
#include "frontends/gguf/TensorName.h"

#include <gtest/gtest.h>

namespace memra::gguf {
namespace {

TEST(TensorName, SplitsTheLayerAndTheRest) {
  auto l = ParseLayerTensorName("blk.12.ffn_down.weight");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->layer, 12);
  EXPECT_EQ(l->rest, "ffn_down.weight");
  auto n = ParseLayerTensorName("blk.0.nextn.eh_proj.weight");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->layer, 0);
  EXPECT_EQ(n->rest, "nextn.eh_proj.weight");
}

TEST(TensorName, OtherNamesAreNotLayerNames) {
  for (const char* name :
       {"output.weight", "token_embd.weight", "blk.", "blk.3", "blk..x", "blk.x.attn_q.weight", "blk.+3.attn_q.weight",
        "blk.-1.attn_q.weight", "blk. 3.attn_q.weight", "blk.99999999999999999999.w", "xblk.3.w"})
    EXPECT_FALSE(ParseLayerTensorName(name).has_value()) << name;
}

}  // namespace
}  // namespace memra::gguf
