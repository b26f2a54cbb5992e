// src/tensor/handoff.h: tensors passed between front ends by ticket, each ticket taken once.
#include "tensor/handoff.h"

#include "test_util.h"

namespace lz {
namespace {

using Handoff = testing::RuntimeTest;

TEST_F(Handoff, ATicketGivesBackTheSameTensorsOnce) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor b = a * 2.0f;
  uint64_t ticket = internal::put_tensors({a, b, a});
  std::vector<Tensor> got = internal::take_tensors(ticket);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].impl(), a.impl());  // the same tensors, not copies
  EXPECT_EQ(got[1].impl(), b.impl());
  EXPECT_EQ(got[2].impl(), a.impl());
  EXPECT_THROW(internal::take_tensors(ticket), ValueError);  // taken already
}

TEST_F(Handoff, AnUnknownTicketRaisesAndTicketsAreDistinct) {
  EXPECT_THROW(internal::take_tensors(0), ValueError);
  uint64_t t1 = internal::put_tensors({});
  uint64_t t2 = internal::put_tensors({tensor<float>({1}, {1})});
  EXPECT_NE(t1, t2);
  EXPECT_TRUE(internal::take_tensors(t1).empty());
  EXPECT_EQ(internal::take_tensors(t2).size(), 1u);
}

}  // namespace
}  // namespace lz
