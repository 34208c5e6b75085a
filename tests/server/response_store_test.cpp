// ResponseStore: bounded, least recently used first out, shared immutable entries, erase.
#include "gantry/server/response_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace gantry::server {
namespace {

std::shared_ptr<const StoredResponse> entry(const std::string& id, const std::string& body = "{}",
                                            size_t owner = 0) {
  auto r = std::make_shared<StoredResponse>();
  r->id = id;
  r->owner = owner;
  r->body = body;
  r->conversation.emplace_back("user", "hi " + id);
  return r;
}

TEST(ResponseStore, PutGetErase) {
  ResponseStore s(4);
  EXPECT_EQ(s.get("a", 0), nullptr);
  s.put(entry("a", "A"));
  auto a = s.get("a", 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->body, "A");
  EXPECT_EQ(a->conversation.at(0).content, "hi a");
  EXPECT_TRUE(s.erase("a", 0));
  EXPECT_FALSE(s.erase("a", 0));
  EXPECT_EQ(s.get("a", 0), nullptr);
  EXPECT_EQ(a->body, "A") << "an entry got before stays valid";
  EXPECT_EQ(s.size(), 0u);
}

TEST(ResponseStore, AnotherOwnerSeesNothing) {
  ResponseStore s(2);
  s.put(entry("a", "A", 1));
  s.put(entry("b", "B", 2));
  EXPECT_EQ(s.get("a", 2), nullptr) << "owner 2 cannot read owner 1's response, knowing its id";
  EXPECT_EQ(s.get("a", 0), nullptr) << "nor can a request without an owner";
  EXPECT_FALSE(s.erase("a", 2)) << "nor delete it";
  ASSERT_NE(s.get("a", 1), nullptr) << "it is still there for its owner";
  EXPECT_EQ(s.get("a", 1)->body, "A");
  // a's owner read it last, so b is the least recently used; another owner's try on b is no use of it
  // (else a would be evicted next).
  EXPECT_EQ(s.get("b", 1), nullptr);
  s.put(entry("c", "C", 1));
  EXPECT_EQ(s.get("b", 2), nullptr) << "b was the least recently used";
  EXPECT_NE(s.get("a", 1), nullptr);
  EXPECT_TRUE(s.erase("a", 1));
  EXPECT_EQ(s.get("a", 1), nullptr);
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsed) {
  ResponseStore s(2);
  s.put(entry("a"));
  s.put(entry("b"));
  ASSERT_NE(s.get("a", 0), nullptr);  // a is now more recent than b
  s.put(entry("c"));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.get("b", 0), nullptr);
  EXPECT_NE(s.get("a", 0), nullptr);
  EXPECT_NE(s.get("c", 0), nullptr);
}

TEST(ResponseStore, PutReplacesTheSameId) {
  ResponseStore s(2);
  s.put(entry("a", "1"));
  s.put(entry("a", "2"));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.get("a", 0)->body, "2");
}

TEST(ResponseStore, CapacityZeroKeepsNothing) {
  ResponseStore s(0);
  s.put(entry("a"));
  EXPECT_EQ(s.get("a", 0), nullptr);
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
  EXPECT_EQ(s.get("a", 0), nullptr) << "the least recently used goes first";
  EXPECT_LE(s.bytes(), 2 * one + one / 2);
  s.put(entry("huge", std::string(3 * one, 'x')));
  EXPECT_EQ(s.get("huge", 0), nullptr) << "larger than the whole budget: not kept";
  EXPECT_EQ(s.size(), 2u) << "and nothing was evicted for it";
  EXPECT_TRUE(s.erase("b", 0));
  EXPECT_TRUE(s.erase("c", 0));
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
        if (auto e = s.get(id, 0)) {
          EXPECT_EQ(e->id, id);
        }
        if (i % 3 == 0) s.erase(id, 0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(s.size(), 8u);
  size_t held = 0;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 16; ++i) {
      if (auto e = s.get(std::to_string(t) + "-" + std::to_string(i), 0)) held += e->bytes();
    }
  }
  EXPECT_EQ(s.bytes(), held) << "the byte count matches what is held";
}

}  // namespace
}  // namespace gantry::server
