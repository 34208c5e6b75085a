// The rerank codec (POST /v1/rerank, /rerank): request fields and their errors, the answer's shape,
// sorting, top_n and return_documents.
#include "gantry/protocol/rerank_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gantry::protocol::rerank {
namespace {

using nlohmann::json;

RerankRequest ok(const std::string& body) {
  auto r = parse_rerank_request(body);
  if (auto* e = std::get_if<openai::ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->message;
    return {};
  }
  return std::get<RerankRequest>(r);
}

openai::ApiError err(const std::string& body) {
  auto r = parse_rerank_request(body);
  if (auto* e = std::get_if<openai::ApiError>(&r)) return *e;
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(RerankCodec, ParsesTheRequest) {
  auto r = ok(R"({"model":"m","query":"q","documents":["a","b","c"],"top_n":2,"return_documents":true,
                  "extra":1})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.query, "q");
  EXPECT_EQ(r.documents, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(r.has_top_n);
  EXPECT_EQ(r.top_n, 2u);
  EXPECT_TRUE(r.return_documents);
  auto d = ok(R"({"model":"m","query":"","documents":["a"],"top_n":null})");
  EXPECT_FALSE(d.has_top_n);
  EXPECT_FALSE(d.return_documents);
  // A top_n beyond the documents (even beyond int64) is all of them.
  EXPECT_EQ(ok(R"({"model":"m","query":"q","documents":["a","b"],"top_n":18446744073709551615})").top_n, 2u);
  EXPECT_EQ(ok(R"({"model":"m","query":"q","documents":["a","b"],"top_n":0})").top_n, 0u);
}

TEST(RerankCodec, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"query":"q","documents":["a"]})", "model"},
      {R"({"model":1,"query":"q","documents":["a"]})", "model"},
      {R"({"model":"m","documents":["a"]})", "query"},
      {R"({"model":"m","query":["q"],"documents":["a"]})", "query"},
      {R"({"model":"m","query":"q"})", "documents"},
      {R"({"model":"m","query":"q","documents":[]})", "documents"},
      {R"({"model":"m","query":"q","documents":"a"})", "documents"},
      {R"({"model":"m","query":"q","documents":["a",2]})", "documents"},
      {R"({"model":"m","query":"q","documents":["a"],"top_n":-1})", "top_n"},
      {R"({"model":"m","query":"q","documents":["a"],"top_n":1.5})", "top_n"},
      {R"({"model":"m","query":"q","documents":["a"],"return_documents":"yes"})", "return_documents"},
      {R"([1])", ""},
      {R"({"model":)", ""},
  };
  for (const auto& c : cases) {
    auto e = err(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
  }
  EXPECT_NE(err(R"({"model":"m","query":"q","documents":["a",2]})").message.find("documents[1]"),
            std::string::npos);
}

TEST(RerankCodec, AnswerIsSortedCutAndCarriesDocumentsWhenAsked) {
  RerankRequest r = ok(R"({"model":"m","query":"q","documents":["a","b","c","d"]})");
  const std::vector<float> scores = {0.25f, 0.75f, 0.25f, 0.5f};
  json a = json::parse(rerank_response(r, scores, 40));
  EXPECT_EQ(a["model"], "m");
  EXPECT_EQ(a["object"], "list");
  EXPECT_EQ(a["usage"], (json{{"prompt_tokens", 40}, {"total_tokens", 40}}));
  ASSERT_EQ(a["results"].size(), 4u);
  std::vector<int> order;
  for (const auto& x : a["results"]) {
    order.push_back(x["index"].get<int>());
    EXPECT_FALSE(x.contains("document"));
    EXPECT_FLOAT_EQ(x["relevance_score"].get<float>(), scores[x["index"].get<size_t>()]);
  }
  EXPECT_EQ(order, (std::vector<int>{1, 3, 0, 2}));  // ties keep the documents' order

  r.has_top_n = true;
  r.top_n = 2;
  r.return_documents = true;
  json b = json::parse(rerank_response(r, scores, 40));
  ASSERT_EQ(b["results"].size(), 2u);
  EXPECT_EQ(b["results"][0]["index"], 1);
  EXPECT_EQ(b["results"][0]["document"], (json{{"text", "b"}}));
  EXPECT_EQ(b["results"][1]["document"], (json{{"text", "d"}}));
  r.top_n = 0;
  EXPECT_TRUE(json::parse(rerank_response(r, scores, 40))["results"].empty());
}

}  // namespace
}  // namespace gantry::protocol::rerank
