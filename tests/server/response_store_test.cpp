// ResponseStore: bounded, least recently used first out, shared immutable entries, erase.
#include "gantry/server/response_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace gantry::server {
namespace {

std::shared_ptr<const StoredResponse> entry(const std::string& id, const std::string& body = "{}") {
  auto r = std::make_shared<StoredResponse>();
  r->id = id;
  r->body = body;
  r->conversation.emplace_back("user", "hi " + id);
  return r;
}

TEST(ResponseStore, PutGetErase) {
  ResponseStore s(4);
  EXPECT_EQ(s.get("a"), nullptr);
  s.put(entry("a", "A"));
  auto a = s.get("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->body, "A");
  EXPECT_EQ(a->conversation.at(0).content, "hi a");
  EXPECT_TRUE(s.erase("a"));
  EXPECT_FALSE(s.erase("a"));
  EXPECT_EQ(s.get("a"), nullptr);
  EXPECT_EQ(a->body, "A") << "an entry got before stays valid";
  EXPECT_EQ(s.size(), 0u);
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsed) {
  ResponseStore s(2);
  s.put(entry("a"));
  s.put(entry("b"));
  ASSERT_NE(s.get("a"), nullptr);  // a is now more recent than b
  s.put(entry("c"));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.get("b"), nullptr);
  EXPECT_NE(s.get("a"), nullptr);
  EXPECT_NE(s.get("c"), nullptr);
}

TEST(ResponseStore, PutReplacesTheSameId) {
  ResponseStore s(2);
  s.put(entry("a", "1"));
  s.put(entry("a", "2"));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.get("a")->body, "2");
}

TEST(ResponseStore, CapacityZeroKeepsNothing) {
  ResponseStore s(0);
  s.put(entry("a"));
  EXPECT_EQ(s.get("a"), nullptr);
  EXPECT_EQ(s.size(), 0u);
}

TEST(ResponseStore, BoundedInBytes) {
  const size_t one = entry("a")->bytes();
  ResponseStore s(100, 2 * one + one / 2);  // room for two entries of this size
  s.put(entry("a"));
  s.put(entry("b"));
  EXPECT_EQ(s.bytes(), 2 * one);
  s.put(entry("c"));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.get("a"), nullptr) << "the least recently used goes first";
  EXPECT_LE(s.bytes(), 2 * one + one / 2);
  s.put(entry("huge", std::string(3 * one, 'x')));
  EXPECT_EQ(s.get("huge"), nullptr) << "larger than the whole budget: not kept";
  EXPECT_EQ(s.size(), 2u) << "and nothing was evicted for it";
  EXPECT_TRUE(s.erase("b"));
  EXPECT_TRUE(s.erase("c"));
  EXPECT_EQ(s.bytes(), 0u);
}

TEST(ResponseStore, ManyThreadsAtOnce) {
  ResponseStore s(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&s, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i % 16);
        s.put(entry(id));
        if (auto e = s.get(id)) {
          EXPECT_EQ(e->id, id);
        }
        if (i % 3 == 0) s.erase(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(s.size(), 8u);
  size_t held = 0;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 16; ++i) {
      if (auto e = s.get(std::to_string(t) + "-" + std::to_string(i))) held += e->bytes();
    }
  }
  EXPECT_EQ(s.bytes(), held) << "the byte count matches what is held";
}

}  // namespace
}  // namespace gantry::server
