// EnumNames: both directions of one table, aliases, the parse error, and use at compile time.
#include "gantry/core/enum_names.h"

#include <gtest/gtest.h>

#include "gantry/core/dtype.h"

namespace gantry {
namespace {

enum class Color { kRed, kGreen, kBlue, kUnnamed };

constexpr auto kColors = enum_names<Color>("color", {
                                                        {Color::kRed, "red"},
                                                        {Color::kGreen, "green"},
                                                        {Color::kBlue, "blue"},
                                                        {Color::kRed, "r"},
                                                        {Color::kBlue, "b"},
                                                    });

// Both directions are usable in constant expressions.
static_assert(kColors.name_of(Color::kGreen) == "green");
static_assert(kColors.find("b") == Color::kBlue);
static_assert(!kColors.find("purple").has_value());

TEST(EnumNames, NameOfGivesTheCanonicalNameNotAnAlias) {
  EXPECT_EQ(kColors.name_of(Color::kRed), "red");
  EXPECT_EQ(kColors.name_of(Color::kBlue), "blue");
  EXPECT_EQ(kColors.name_of(Color::kUnnamed), "unknown");
  EXPECT_EQ(kColors.name_of(Color::kUnnamed, "none"), "none");
}

TEST(EnumNames, FindAcceptsNamesAndAliasesExactly) {
  EXPECT_EQ(kColors.find("red"), Color::kRed);
  EXPECT_EQ(kColors.find("r"), Color::kRed);
  EXPECT_EQ(kColors.find("green"), Color::kGreen);
  EXPECT_FALSE(kColors.find("Red").has_value());
  EXPECT_FALSE(kColors.find("").has_value());
  EXPECT_FALSE(kColors.find("red ").has_value());
}

TEST(EnumNames, EveryCanonicalNameRoundTrips) {
  for (const auto& e : kColors.entries()) EXPECT_EQ(kColors.find(kColors.name_of(e.value)), e.value);
}

TEST(EnumNames, ParseErrorNamesWhatTheTextAndTheChoices) {
  EXPECT_EQ(kColors.parse("b").value(), Color::kBlue);
  auto bad = kColors.parse("purple");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "color 'purple' is not one of red, green, blue");
}

TEST(EnumNames, NamesListsCanonicalOrAll) {
  EXPECT_EQ(kColors.names(), "red, green, blue");
  EXPECT_EQ(kColors.names(/*with_aliases=*/true), "red, green, blue, r, b");
  EXPECT_EQ(kColors.names(false, "|"), "red|green|blue");
}

// DType is one of the enums built on it: short names are canonical, long spellings are aliases.
TEST(EnumNames, DTypeNamesKeepTheirSpellings) {
  EXPECT_EQ(dtype_name(DType::kBFloat16), "bf16");
  EXPECT_EQ(dtype_name(DType::kString), "string");
  EXPECT_EQ(parse_dtype("double"), DType::kFloat64);
  EXPECT_EQ(parse_dtype("str"), DType::kString);
  EXPECT_EQ(parse_dtype("u16"), DType::kUInt16);
  EXPECT_FALSE(parse_dtype("complex64").has_value());
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
}

}  // namespace
}  // namespace gantry
