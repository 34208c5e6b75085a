// The one id generator: formats, alphabet, and no repeats (every bit from getrandom).
#include "gantry/core/random_id.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace gantry {
namespace {

TEST(RandomId, HexIdsCarry128Bits) {
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = random_hex_id("resp_");
    ASSERT_EQ(id.size(), 5u + 32u) << id;
    ASSERT_EQ(id.rfind("resp_", 0), 0u) << id;
    ASSERT_EQ(id.find_first_not_of("0123456789abcdef", 5), std::string::npos) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 2000u);
  EXPECT_EQ(random_hex_id("").size(), 32u);
}

TEST(RandomId, Base62IdsAreUniform) {
  static constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::set<std::string> seen;
  std::map<char, int> count;
  const int n = 6000;  // 144,000 characters: 2,323 of each expected, ~48 the standard deviation
  for (int i = 0; i < n; ++i) {
    const std::string id = random_base62_id("toolu_");
    ASSERT_EQ(id.size(), 6u + 24u) << id;
    ASSERT_EQ(id.rfind("toolu_", 0), 0u) << id;
    for (char c : id.substr(6)) {
      ASSERT_NE(kChars.find(c), std::string_view::npos) << id;
      ++count[c];
    }
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  ASSERT_EQ(count.size(), 62u) << "every character appears";
  // Far outside chance (10 standard deviations), as a modulo bias of 256 % 62 would be (+25% on 8 chars).
  for (const auto& [c, k] : count) {
    EXPECT_GT(k, 1850) << c;
    EXPECT_LT(k, 2800) << c;
  }
}

TEST(RandomId, SecureBytesFillTheWholeSpan) {
  unsigned char a[64] = {}, b[64] = {};
  secure_random_bytes(a);
  secure_random_bytes(b);
  EXPECT_NE(std::string(reinterpret_cast<char*>(a), 64), std::string(reinterpret_cast<char*>(b), 64));
  int zeros = 0;
  for (unsigned char x : a) zeros += x == 0;
  EXPECT_LT(zeros, 16) << "the tail was left unfilled";
}

}  // namespace
}  // namespace gantry
