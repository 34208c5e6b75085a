#include "gantry/core/version.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

Version V(const char* s) { return Version::parse(s).value(); }

TEST(VersionTest, ComparesNumericallyNotAsStrings) {
  EXPECT_LT(V("9.0"), V("11.8"));
  EXPECT_LT(V("11.8"), V("12.0"));
  EXPECT_GT(V("535.104.05"), V("535.86.10"));
  EXPECT_EQ(V("12"), V("12.0.0"));
}

TEST(VersionTest, AcceptsPrefixAndSuffix) {
  EXPECT_EQ(V("v1.29.0"), V("1.29"));
  EXPECT_EQ(V("0.5.0-dev"), V("0.5"));
  EXPECT_EQ(V("13.0\n").to_string(), "13.0");
}

TEST(VersionTest, RejectsGarbage) {
  for (const char* bad : {"", "abc", "1..2", "1.2.", "1.2.3.4.5", ".1", "1.x"}) {
    auto r = Version::parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("is not a version"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gantry
