// The DOM budget of JSON from clients (JsonShapeLimits::max_dom_bytes, client_json_limits): amplifying
// documents are refused before their memory is spent, legitimate bodies pass, and the estimate follows
// what malloc really hands out.
#include <gtest/gtest.h>
#include <malloc.h>

#include <functional>
#include <string>

#include "gantry/core/json.h"

namespace gantry {
namespace {

// `[item,item,...]` (or an object of "k<i>": item members) of about `bytes` of text.
std::string repeated(const std::string& item, size_t bytes, bool object = false) {
  std::string s(1, object ? '{' : '[');
  for (size_t i = 0; s.size() < bytes; ++i) {
    if (i) s += ',';
    if (object) s += "\"k" + std::to_string(i) + "\":";
    s += item;
  }
  s += object ? '}' : ']';
  return s;
}

TEST(JsonMemory, AmplifyingDocumentsAreRefused) {
  const size_t mib4 = size_t{4} << 20;
  for (const std::string& text :
       {repeated("{}", mib4), repeated("[]", mib4), repeated("\"\"", mib4), repeated("0", mib4),
        repeated("{}", mib4, true), repeated("[{},[],\"\",0]", mib4),
        "{\"model\":\"m\",\"ignored\":" + repeated("{}", mib4) + "}"}) {
    for (bool unique : {false, true}) {
      auto j = unique ? parse_json_unique_keys(text, "the request body", client_json_limits(text))
                      : parse_json(text, "the request body", client_json_limits(text));
      ASSERT_FALSE(j.ok()) << text.substr(0, 40);
      EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
      const std::string& m = j.status().message();
      EXPECT_EQ(m.rfind("the request body: the JSON would take more than " +
                            std::to_string(json_dom_budget(text.size())) + " bytes of memory",
                        0),
                0u)
          << m;
      EXPECT_NE(m.find("4x its " + std::to_string(text.size()) + " bytes plus 8 MiB"), std::string::npos)
          << m;
    }
    EXPECT_TRUE(parse_json(text, "a file").ok()) << "files Gantry reads are not bounded by default";
  }
}

TEST(JsonMemory, TheBuildStopsAtTheBudget) {
  const std::string text = repeated("{}", size_t{16} << 20);
  const size_t max = size_t{1} << 20;
  nlohmann::json out;
  json_detail::BuildingSax<nlohmann::json> sax(out, /*unique_keys=*/true, max);
  EXPECT_FALSE(nlohmann::json::sax_parse(text, &sax));
  EXPECT_TRUE(sax.over());
  EXPECT_FALSE(sax.error_.has_value());
  // Stopped at the first value over: the count is at most one step (an array's vector doubling) past it.
  EXPECT_GT(sax.used(), max);
  EXPECT_LE(sax.used(), 2 * max);
  // ...and the partial DOM holds no more than the budget's worth of the 5.6 million empty objects.
  ASSERT_TRUE(out.is_array());
  EXPECT_LT(out.size(), max / 64);
  EXPECT_GT(out.size(), max / 256);
}

TEST(JsonMemory, LegitimateBodiesPass) {
  std::vector<std::string> bodies;
  // A long prompt: ~1x.
  bodies.push_back(R"({"model":"m","messages":[{"role":"user","content":")" +
                   std::string(size_t{40} << 20, 'a') + R"("}]})");
  // Token arrays for embeddings, as json.dumps writes them: 256 inputs of 8,192 ids below 150,000 (~3x).
  {
    std::string s = R"({"model":"m","input":[)";
    for (int i = 0; i < 256; ++i) {
      s += i ? ", [" : "[";
      for (int t = 0; t < 8192; ++t) s += (t ? ", " : "") + std::to_string((t * 7919 + i * 104729) % 150000);
      s += "]";
    }
    bodies.push_back(s + "]}");
  }
  // One prompt of 100,000 tokens as token ids, compact (JSON.stringify).
  {
    std::string s = R"({"model":"m","prompt":[)";
    for (int t = 0; t < 100000; ++t) s += (t ? "," : "") + std::to_string((t * 7919) % 150000);
    bodies.push_back(s + "]}");
  }
  // A long conversation of short turns (~10x, within the allowance at this size).
  {
    std::string s = R"({"model":"m","messages":[)";
    for (int i = 0; i < 10000; ++i)
      s += std::string(i ? "," : "") + R"({"role":")" + (i % 2 ? "assistant" : "user") +
           R"(","content":"turn )" + std::to_string(i) + R"("})";
    bodies.push_back(s + "]}");
  }
  // 128 tools with schemas of 8 described properties.
  {
    std::string s = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[)";
    for (int t = 0; t < 128; ++t) {
      s += std::string(t ? "," : "") + R"({"type":"function","function":{"name":"tool_)" + std::to_string(t) +
           R"(","description":"Does thing number )" + std::to_string(t) +
           R"( for the user.","parameters":{"type":"object","properties":{)";
      for (int p = 0; p < 8; ++p)
        s += std::string(p ? "," : "") + R"("param_)" + std::to_string(p) +
             R"(":{"type":"string","description":"The value of parameter )" + std::to_string(p) + R"("})";
      s += R"(},"required":["param_0"]}}})";
    }
    bodies.push_back(s + "]}");
  }
  for (const auto& body : bodies) {
    auto j = parse_json_unique_keys(body, "the request body", client_json_limits(body));
    EXPECT_TRUE(j.ok()) << body.size() << " bytes: " << j.status().message();
  }
}

#if defined(__SANITIZE_ADDRESS__)
#define GANTRY_NO_MALLINFO 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GANTRY_NO_MALLINFO 1
#endif
#endif

// The bytes malloc has handed out (small blocks and mapped ones), with their headers.
size_t malloc_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

TEST(JsonMemory, TheEstimateFollowsMalloc) {
#ifdef GANTRY_NO_MALLINFO
  GTEST_SKIP() << "the sanitizer's allocator keeps its own books";
#else
  const size_t mib2 = size_t{2} << 20;
  for (const std::string& text :
       {repeated("{}", mib2), repeated("[]", mib2), repeated("\"\"", mib2), repeated("0", mib2),
        repeated("{}", mib2, true), repeated("\"a string longer than sixteen\"", mib2),
        repeated(R"({"role":"user","content":"hello there"})", mib2),
        repeated(R"({"type":"string","description":"the value of a parameter of a tool"})", mib2, true)}) {
    for (bool unique : {false, true}) {
      const size_t before = malloc_in_use();
      nlohmann::json out;
      json_detail::BuildingSax<nlohmann::json> sax(out, unique, SIZE_MAX);
      ASSERT_TRUE(nlohmann::json::sax_parse(text, &sax));
      const double real = static_cast<double>(malloc_in_use() - before);
      const double ratio = static_cast<double>(sax.used()) / real;
      EXPECT_GT(ratio, 0.8) << text.substr(0, 60) << ": estimated " << sax.used() << ", malloc " << real;
      EXPECT_LT(ratio, 1.25) << text.substr(0, 60) << ": estimated " << sax.used() << ", malloc " << real;
    }
  }
#endif
}

}  // namespace
}  // namespace gantry
