// Admission (gantry/runtime/admission.h): capacity plus max_queue tickets per model, given back however the
// request ends; a throw between admission and the answer no longer leaks a place (issue 35).
#include "gantry/runtime/admission.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace gantry::runtime {
namespace {

TEST(Admission, TakesCapacityPlusQueuePerModelAndRefusesTheNext) {
  Admission a(2);
  std::vector<Admission::Ticket> held;
  for (int i = 0; i < 3; ++i) {
    auto t = a.admit("m", 1);
    ASSERT_TRUE(t.ok()) << i;
    held.push_back(std::move(*t));
  }
  auto refused = a.admit("m", 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("model 'm' is at capacity (1 running at once, 2 waiting"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(a.admit("other", 1).ok()) << "each model has its own places";
  EXPECT_EQ(a.outstanding().at("m"), 3u);
  held.pop_back();
  EXPECT_TRUE(a.admit("m", 1).ok()) << "a dropped ticket gives its place back";
}

TEST(Admission, AnExceptionAfterAdmissionGivesThePlaceBack) {
  Admission a(0);
  for (int i = 0; i < 100; ++i) {
    try {
      auto t = a.admit("m", 1);
      ASSERT_TRUE(t.ok()) << "round " << i << ": a place leaked";
      throw std::runtime_error("the codec threw");
    } catch (const std::runtime_error&) {
    }
  }
  EXPECT_TRUE(a.outstanding().empty());
}

TEST(Admission, TicketsMoveAndReleaseOnce) {
  Admission a(0);
  auto t = a.admit("m", 1);
  ASSERT_TRUE(t.ok());
  Admission::Ticket moved = std::move(*t);
  EXPECT_FALSE(static_cast<bool>(*t));
  EXPECT_TRUE(static_cast<bool>(moved));
  EXPECT_FALSE(a.admit("m", 1).ok());
  moved.release();
  moved.release();  // idempotent
  EXPECT_TRUE(a.outstanding().empty());
  auto again = a.admit("m", 1);
  ASSERT_TRUE(again.ok());
  Admission::Ticket other;
  other = std::move(*again);  // the assigned-to ticket held nothing
  EXPECT_EQ(a.outstanding().at("m"), 1u);
  a.set_max_queue(1);
  EXPECT_TRUE(a.admit("m", 1).ok());
}

}  // namespace
}  // namespace gantry::runtime
