// The OpenAI codec: every request field and its errors, response and chunk shapes, SSE framing,
// base64 embeddings.
#include "gantry/protocol/openai_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "gantry/core/json.h"

namespace gantry::protocol::openai {
namespace {

using backend::FinishReason;
using nlohmann::json;
using Kind = backend::OutputConstraint::Kind;

TextRequest chat_ok(const std::string& body) {
  auto r = parse_text_request(body, Endpoint::kChat);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->message;
    return {};
  }
  return std::get<TextRequest>(r);
}

TextRequest completion_ok(const std::string& body) {
  auto r = parse_text_request(body, Endpoint::kCompletion);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->message;
    return {};
  }
  return std::get<TextRequest>(r);
}

// Asserts a 400 naming `param` whose message contains `phrase`.
void expect_error(const std::variant<TextRequest, ApiError>& r, const std::string& param,
                  const std::string& phrase) {
  ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << "expected an error about " << param;
  const auto& e = std::get<ApiError>(r);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, param);
  EXPECT_NE(e.message.find(phrase), std::string::npos) << "message: " << e.message;
}

void chat_error(const std::string& body, const std::string& param, const std::string& phrase) {
  SCOPED_TRACE(body);
  expect_error(parse_text_request(body, Endpoint::kChat), param, phrase);
}

void completion_error(const std::string& body, const std::string& param, const std::string& phrase) {
  SCOPED_TRACE(body);
  expect_error(parse_text_request(body, Endpoint::kCompletion), param, phrase);
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";
std::string chat_body(const std::string& extra) {
  return "{" + kMsgs + (extra.empty() ? "" : "," + extra) + "}";
}

// The 400 a chat body gets (an empty ApiError, after a test failure, when it is accepted).
ApiError chat_err(const std::string& body) {
  auto r = parse_text_request(body, Endpoint::kChat);
  if (auto* e = std::get_if<ApiError>(&r)) {
    EXPECT_EQ(e->http_status, 400);
    return *e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

// Parses one SSE event "data: X\n\n" and returns X as JSON.
json sse_json(const std::string& event) {
  EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
  EXPECT_GE(event.size(), 8u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  const std::string payload = event.substr(6, event.size() - 8);
  EXPECT_EQ(payload.find('\n'), std::string::npos) << "an event's data must be one line";
  return json::parse(payload);
}

TEST(OpenAiCodec, ChatRequestDefaults) {
  TextRequest r = chat_ok(R"({"model":"m","messages":[{"role":"user","content":"hello"}]})");
  EXPECT_EQ(r.endpoint, Endpoint::kChat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.chat.messages.size(), 1u);
  EXPECT_EQ(r.chat.messages[0].role, "user");
  EXPECT_EQ(r.chat.messages[0].content, "hello");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.generation.max_tokens, 0) << "0 = unset: the server picks";
  EXPECT_EQ(r.generation.n_logprobs, -1);
  EXPECT_EQ(r.generation.constraint.kind, Kind::kNone);
  EXPECT_TRUE(r.generation.stop.empty());
  const backend::SamplingParams defaults;
  EXPECT_EQ(r.generation.sampling.temperature, defaults.temperature);
  EXPECT_EQ(r.generation.sampling.top_p, defaults.top_p);
  EXPECT_EQ(r.generation.sampling.seed, defaults.seed);
}

TEST(OpenAiCodec, ChatRequestEveryField) {
  TextRequest r = chat_ok(R"({
    "model": "tiny",
    "messages": [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}
    ],
    "stream": true, "stream_options": {"include_usage": true},
    "max_tokens": 7, "max_completion_tokens": 9,
    "temperature": 0.5, "top_p": 0.9, "seed": 42, "n": 1,
    "stop": ["x", "yy"],
    "logprobs": true, "top_logprobs": 3,
    "response_format": {"type": "json_object"},
    "frequency_penalty": 0, "user": "someone", "unknown_field": {"anything": [1, 2]}
  })");
  EXPECT_EQ(r.model, "tiny");
  ASSERT_EQ(r.chat.messages.size(), 3u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[0].content, "be brief");
  EXPECT_EQ(r.chat.messages[1].content, "ab");
  EXPECT_EQ(r.chat.messages[2].role, "assistant");
  EXPECT_EQ(r.chat.messages[2].content, "");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.generation.max_tokens, 9) << "max_completion_tokens wins over max_tokens";
  EXPECT_FLOAT_EQ(r.generation.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.generation.sampling.top_p, 0.9f);
  EXPECT_EQ(r.generation.sampling.seed, 42u);
  EXPECT_EQ(r.generation.stop, (std::vector<std::string>{"x", "yy"}));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.generation.n_logprobs, 3);
  EXPECT_EQ(r.generation.constraint.kind, Kind::kJsonObject);
}

TEST(OpenAiCodec, ChatRequestSmallerForms) {
  TextRequest r = chat_ok(chat_body(R"("max_tokens": 5, "stop": "END", "logprobs": true, "seed": -1)"));
  EXPECT_EQ(r.generation.max_tokens, 5);
  EXPECT_EQ(r.generation.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.generation.n_logprobs, 0) << "logprobs without top_logprobs: the chosen token only";
  EXPECT_EQ(r.generation.sampling.seed, 0xFFFFFFFFu) << "seeds are taken modulo 2^32";
  r = chat_ok(chat_body(R"("top_p": 0, "temperature": 1.0, "stream": false, "stream_options": null)"));
  EXPECT_EQ(r.generation.sampling.temperature, 0.0f) << "top_p 0 keeps only the best token: greedy";
  r = chat_ok(
      chat_body(R"("n": null, "max_tokens": null, "stop": null, "response_format": {"type": "text"})"));
  EXPECT_EQ(r.generation.max_tokens, 0);
  EXPECT_EQ(r.generation.constraint.kind, Kind::kNone);
}

TEST(OpenAiCodec, ResponseFormatJsonSchema) {
  TextRequest r = chat_ok(chat_body(R"("response_format": {"type": "json_schema", "json_schema": {
      "name": "person", "strict": true,
      "schema": {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}}})"));
  ASSERT_EQ(r.generation.constraint.kind, Kind::kJsonSchema);
  json schema = json::parse(r.generation.constraint.json_schema);
  EXPECT_EQ(schema["properties"]["age"]["type"], "integer");
  EXPECT_EQ(schema["required"][0], "age");
  r = chat_ok(chat_body(R"("response_format": {"type": "json_schema", "json_schema": {"name": "any"}})"));
  EXPECT_EQ(r.generation.constraint.kind, Kind::kJsonObject) << "no schema: any JSON object";
}

// `depth` nested arrays.
std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(OpenAiCodec, DeepJsonIsA400NotACrash) {
  // 100,000 levels in a schema used to overflow the stack when the schema was copied and dumped.
  const std::string deep_schema = chat_body(R"("response_format": {"type": "json_schema", "json_schema": {
      "name": "x", "schema": {"type": "object", "default": )" +
                                            nested(100000) + "}}}");
  chat_error(deep_schema, "", "JSON nests deeper than 64 levels");
  completion_error(R"({"prompt": "hi", "stop": )" + nested(100000) + "}", "",
                   "JSON nests deeper than 64 levels");
  auto emb = parse_embedding_request(R"({"input": )" + nested(65) + "}");
  ASSERT_TRUE(std::holds_alternative<ApiError>(emb));
  EXPECT_EQ(std::get<ApiError>(emb).http_status, 400);
  EXPECT_NE(error_body(std::get<ApiError>(emb)).find("nests deeper than 64 levels"), std::string::npos);
  // Numbers beyond double's range are a 400 too (nlohmann throws for them even without exceptions).
  chat_error(chat_body(R"("temperature": 1e6079)"), "", "not valid JSON");
  // The deepest a request may be is accepted (a schema nesting to the limit, as a client may send).
  TextRequest r = chat_ok(chat_body(R"("response_format": {"type": "json_schema", "json_schema": {
      "name": "x", "schema": {"type": "object", "default": )" +
                                    nested(kMaxJsonDepth - 4) + "}}}"));
  EXPECT_EQ(r.generation.constraint.kind, Kind::kJsonSchema);
}

TEST(OpenAiCodec, ChatRequestErrors) {
  chat_error("not json", "", "not valid JSON");
  chat_error("[1,2]", "", "must be a JSON object");
  chat_error(chat_body(R"("model": "a", "model": "b")"), "", "duplicate key 'model'");
  chat_error(R"({"model":"m"})", "messages", "is required");
  chat_error(R"({"messages":[]})", "messages", "non-empty array");
  chat_error(R"({"messages":"hi"})", "messages", "non-empty array");
  chat_error(R"({"messages":[3]})", "messages[0]", "must be an object");
  chat_error(R"({"messages":[{"content":"x"}]})", "messages[0].role", "non-empty string");
  chat_error(R"({"messages":[{"role":"user","content":5}]})", "messages[0].content", "string or an array");
  chat_error(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]})",
             "messages[0].content[0].type", "not supported");
  chat_error(R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content[0].text",
             "must be a string");
  chat_error(chat_body(R"("model": 3)"), "model", "must be a string");
  chat_error(chat_body(R"("n": 0)"), "n", "must be an integer in 1..128");
  chat_error(chat_body(R"("n": 129)"), "n", "must be an integer in 1..128");
  chat_error(chat_body(R"("n": "1")"), "n", "must be an integer");
  chat_error(chat_body(R"("stream": "yes")"), "stream", "must be a boolean");
  chat_error(chat_body(R"("stream_options": 1)"), "stream_options", "must be an object");
  chat_error(chat_body(R"("stream_options": {"include_usage": 1})"), "stream_options.include_usage",
             "must be a boolean");
  chat_error(chat_body(R"("max_tokens": 0)"), "max_tokens", "must be an integer in 1..");
  chat_error(chat_body(R"("max_tokens": 1.5)"), "max_tokens", "must be an integer");
  chat_error(chat_body(R"("max_completion_tokens": -3)"), "max_completion_tokens",
             "must be an integer in 1..");
  chat_error(chat_body(R"("temperature": 2.5)"), "temperature", "must be a number in 0..2");
  chat_error(chat_body(R"("temperature": "hot")"), "temperature", "must be a number");
  chat_error(chat_body(R"("top_p": 1.1)"), "top_p", "must be a number in 0");
  chat_error(chat_body(R"("seed": 1.5)"), "seed", "must be an integer");
  chat_error(chat_body(R"("stop": ["a","b","c","d","e"])"), "stop", "up to 4");
  chat_error(chat_body(R"("stop": [1])"), "stop", "array of up to 4 strings");
  chat_error(chat_body(R"("stop": 7)"), "stop", "must be a string");
  chat_error(chat_body(R"("logprobs": 1)"), "logprobs", "must be a boolean");
  chat_error(chat_body(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs",
             "must be an integer in 0..20");
  chat_error(chat_body(R"("top_logprobs": 2)"), "top_logprobs", "needs 'logprobs'");
  chat_error(chat_body(R"("response_format": "json")"), "response_format", "must be an object");
  chat_error(chat_body(R"("response_format": {})"), "response_format.type", "must be \"text\"");
  chat_error(chat_body(R"("response_format": {"type": "yaml"})"), "response_format.type", "got \"yaml\"");
  chat_error(chat_body(R"("response_format": {"type": "json_schema"})"), "response_format.json_schema",
             "must be an object");
  chat_error(chat_body(R"("response_format": {"type": "json_schema", "json_schema": {"schema": 3}})"),
             "response_format.json_schema.schema", "must be a JSON schema object");
}

TEST(OpenAiCodec, ChoicesAndSamplingFields) {
  TextRequest r = chat_ok(chat_body(
      R"("n": 3, "presence_penalty": 1.5, "frequency_penalty": -0.5, "repetition_penalty": 1.3,
         "logit_bias": {"15": -100, "7": 2.5, "0": 100}, "seed": 7)"));
  EXPECT_EQ(r.generation.n_choices, 3);
  const auto& sp = r.generation.sampling;
  EXPECT_FLOAT_EQ(sp.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(sp.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(sp.repeat_penalty, 1.3f);
  EXPECT_EQ(sp.seed, 7u);
  auto bias = sp.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{
                      {0, 100.0f}, {7, 2.5f}, {15, -std::numeric_limits<float>::infinity()}}))
      << "-100 bans the token";
  EXPECT_TRUE(backend::validate(sp).ok());
  // llama-server's and Ollama's spelling of the repeat penalty.
  r = completion_ok(R"({"prompt":"p","repeat_penalty":0.8,"n":2})");
  EXPECT_FLOAT_EQ(r.generation.sampling.repeat_penalty, 0.8f);
  EXPECT_EQ(r.generation.n_choices, 2);
  // Absent: the defaults (one choice, penalties off, no bias).
  r = chat_ok(chat_body(R"("presence_penalty": null, "logit_bias": null)"));
  EXPECT_EQ(r.generation.n_choices, 1);
  EXPECT_EQ(r.generation.sampling.presence_penalty, 0.0f);
  EXPECT_EQ(r.generation.sampling.frequency_penalty, 0.0f);
  EXPECT_EQ(r.generation.sampling.repeat_penalty, 1.0f);
  EXPECT_TRUE(r.generation.sampling.logit_bias.empty());

  chat_error(chat_body(R"("presence_penalty": 2.1)"), "presence_penalty", "must be a number in -2..2");
  chat_error(chat_body(R"("presence_penalty": "x")"), "presence_penalty", "must be a number");
  chat_error(chat_body(R"("frequency_penalty": -2.01)"), "frequency_penalty", "must be a number in -2..2");
  chat_error(chat_body(R"("repetition_penalty": 0)"), "repetition_penalty", "must be > 0");
  chat_error(chat_body(R"("repeat_penalty": -1)"), "repeat_penalty", "must be a number in 0..");
  chat_error(chat_body(R"("logit_bias": [1, 2])"), "logit_bias", "must be an object");
  chat_error(chat_body(R"("logit_bias": {"abc": 1})"), "logit_bias", "token ids");
  chat_error(chat_body(R"("logit_bias": {"-3": 1})"), "logit_bias", "token ids");
  chat_error(chat_body(R"("logit_bias": {"99999999999": 1})"), "logit_bias", "token ids");
  chat_error(chat_body(R"("logit_bias": {"3": -101})"), "logit_bias", "-100..100");
  chat_error(chat_body(R"("logit_bias": {"3": "ban"})"), "logit_bias", "-100..100");
}

TEST(OpenAiCodec, CompletionRequest) {
  TextRequest r = completion_ok(
      R"({"model":"m","prompt":"Once","max_tokens":4,"logprobs":2,"stream":true,"temperature":0,"stop":"."})");
  EXPECT_EQ(r.endpoint, Endpoint::kCompletion);
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_TRUE(r.chat.messages.empty());
  EXPECT_EQ(r.generation.max_tokens, 4);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.generation.n_logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.generation.sampling.temperature, 0.0f);
  EXPECT_EQ(r.generation.stop, std::vector<std::string>{"."});
  r = completion_ok(R"({"prompt":["only one"],"logprobs":0})");
  EXPECT_EQ(r.prompt, "only one");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.generation.n_logprobs, 0);
  r = completion_ok(R"({"prompt":"p","max_completion_tokens":3})");
  EXPECT_EQ(r.generation.max_tokens, 0) << "max_completion_tokens is a chat field only";
  EXPECT_FALSE(r.logprobs);
}

TEST(OpenAiCodec, CompletionPromptOfTokenIds) {
  auto r = completion_ok(R"({"prompt":[1,450,1095]})");
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 450, 1095}));
  EXPECT_EQ(r.prompt, "");
  r = completion_ok(R"({"prompt":[[7,8]]})");
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{7, 8}));
  r = completion_ok(R"({"prompt":"text"})");
  EXPECT_TRUE(r.prompt_tokens.empty());
}

TEST(OpenAiCodec, CompletionRequestErrors) {
  completion_error(R"({"model":"m"})", "prompt", "is required");
  completion_error(R"({"prompt":["a","b"]})", "prompt", "several prompts in one request are not supported");
  completion_error(R"({"prompt":[[1,2],[3]]})", "prompt", "several prompts in one request are not supported");
  completion_error(R"({"prompt":[1,-2]})", "prompt", "non-negative integers");
  completion_error(R"({"prompt":[]})", "prompt", "token ids");
  completion_error(R"({"prompt":5})", "prompt", "must be a string");
  completion_error(R"({"prompt":"p","logprobs":6})", "logprobs", "must be an integer in 0..5");
  completion_error(R"({"prompt":"p","logprobs":true})", "logprobs", "must be an integer");
  completion_error(R"({"prompt":"p","n":-1})", "n", "must be an integer in 1..128");
  completion_error(R"({"prompt":"p","presence_penalty":-2.5})", "presence_penalty",
                   "must be a number in -2..2");
  completion_error(R"({"prompt":"p","logit_bias":{"5":101}})", "logit_bias", "-100..100");
  completion_error(R"({"prompt":"p","echo":true})", "echo", "not supported");
}

TEST(OpenAiCodec, EmbeddingRequest) {
  auto r = parse_embedding_request(R"({"model":"e","input":"one"})");
  ASSERT_TRUE(std::holds_alternative<EmbeddingRequest>(r));
  EXPECT_EQ(std::get<EmbeddingRequest>(r).model, "e");
  EXPECT_EQ(std::get<EmbeddingRequest>(r).input, std::vector<std::string>{"one"});
  EXPECT_FALSE(std::get<EmbeddingRequest>(r).base64);
  r = parse_embedding_request(R"({"input":["a","b"],"encoding_format":"base64"})");
  ASSERT_TRUE(std::holds_alternative<EmbeddingRequest>(r));
  EXPECT_EQ(std::get<EmbeddingRequest>(r).input, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(std::get<EmbeddingRequest>(r).base64);

  const auto err = [](const std::string& body, const std::string& param, const std::string& phrase) {
    SCOPED_TRACE(body);
    auto e = parse_embedding_request(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(e));
    EXPECT_EQ(std::get<ApiError>(e).http_status, 400);
    EXPECT_EQ(std::get<ApiError>(e).param, param);
    EXPECT_NE(std::get<ApiError>(e).message.find(phrase), std::string::npos) << std::get<ApiError>(e).message;
  };
  err(R"({"model":"e"})", "input", "is required");
  err(R"({"input":[1,2,3]})", "input", "token ids are not supported");
  err(R"({"input":[]})", "input", "non-empty array");
  err(R"({"input":"a","encoding_format":"int8"})", "encoding_format", "\"float\" or \"base64\"");
  err(R"({"input":"a","dimensions":8})", "dimensions", "not supported");
  err("{", "", "not valid JSON");
}

TEST(OpenAiCodec, ErrorBody) {
  ApiError e;
  e.message = "bad n";
  e.param = "n";
  json j = json::parse(error_body(e));
  EXPECT_EQ(j["error"]["message"], "bad n");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "n");
  EXPECT_TRUE(j["error"]["code"].is_null());
  ApiError nf{404, "no such model", "invalid_request_error", "", "model_not_found"};
  j = json::parse(error_body(nf));
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  const std::string ev = sse_error(nf);
  EXPECT_EQ(sse_json(ev)["error"]["message"], "no such model");
}

TEST(OpenAiCodec, ErrorsFromStatus) {
  ApiError e = api_error(InvalidArgument("unsupported JSON schema keyword 'pattern'"), "response_format");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, "response_format");
  EXPECT_NE(e.message.find("'pattern'"), std::string::npos);
  // A prompt longer than the context is the request's fault, also once wrapped with context.
  e = api_error(backend::context_length_exceeded("the prompt has 900 tokens").with_context("request 0"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_TRUE(api_error(InvalidArgument("bad schema")).code.empty());
  // Resource exhaustion is the server's (a full queue or KV cache): retry later.
  e = api_error(ResourceExhausted("out of KV cache space"));
  EXPECT_EQ(e.http_status, 429);
  EXPECT_TRUE(e.code.empty());
  EXPECT_EQ(api_error(NotFound("no model x")).http_status, 404);
  e = api_error(Unavailable("draining"));
  EXPECT_EQ(e.http_status, 503);
  EXPECT_EQ(e.type, "server_error");
  e = api_error(Internal("bug"));
  EXPECT_EQ(e.http_status, 500);
  EXPECT_EQ(e.type, "server_error");
  EXPECT_TRUE(json::parse(error_body(e))["error"]["param"].is_null());
}

TEST(OpenAiCodec, FinishReasons) {
  EXPECT_EQ(finish_reason(FinishReason::kEndOfGeneration), "stop");
  EXPECT_EQ(finish_reason(FinishReason::kStopString), "stop");
  EXPECT_EQ(finish_reason(FinishReason::kMaxTokens), "length");
  EXPECT_EQ(finish_reason(FinishReason::kCancelled), "stop");
}

backend::GenerationResult sample_result() {
  backend::GenerationResult g;
  g.text = "Hi there";
  g.tokens = {10, 11};
  g.n_prompt_tokens = 5;
  g.finish = FinishReason::kMaxTokens;
  g.logprobs = {{10, "Hi", -0.5f, {{"Hi", -0.5f}, {"Yo", -1.5f}}},
                {11, " there", -0.25f, {{" there", -0.25f}, {"!", -2.0f}}}};
  return g;
}

// The parsed answer of a plain-text generation.
backend::ChatOutput text_output(const backend::GenerationResult& g) {
  backend::ChatOutput o;
  o.content = g.text;
  return o;
}

TEST(OpenAiCodec, ChatResponseShape) {
  TextRequest req = chat_ok(chat_body(""));
  json j = json::parse(
      chat_response("chatcmpl-1", "tiny", 1700000000, sample_result(), text_output(sample_result()), req));
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 1u);
  const json& c = j["choices"][0];
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_EQ(c["message"]["content"], "Hi there");
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 5},
                              {"completion_tokens", 2},
                              {"total_tokens", 7},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
}

// Prompt tokens served by the prompt cache: usage.prompt_tokens_details.cached_tokens (prompt_tokens
// still counts the whole prompt, as OpenAI's does), in bodies and in the stream's usage chunk.
TEST(OpenAiCodec, UsageCarriesCachedTokens) {
  auto g = sample_result();
  g.n_cached_tokens = 4;
  TextRequest req = chat_ok(chat_body(""));
  json j = json::parse(chat_response("c", "tiny", 1, g, text_output(g), req));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  TextRequest creq = completion_ok(R"({"model": "m", "prompt": "x"})");
  j = json::parse(completion_response("c", "tiny", 1, g, creq));
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  json u = sse_json(usage_chunk("id1", "m", 3, Endpoint::kChat, 4, 6, 3));
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
}

TEST(OpenAiCodec, CachePromptField) {
  EXPECT_TRUE(chat_ok(chat_body("")).generation.cache_prompt);
  EXPECT_FALSE(chat_ok(chat_body(R"("cache_prompt": false)")).generation.cache_prompt);
  EXPECT_TRUE(chat_ok(chat_body(R"("cache_prompt": true)")).generation.cache_prompt);
  chat_error(chat_body(R"("cache_prompt": "no")"), "cache_prompt", "");
}

TEST(OpenAiCodec, IgnoreEosField) {
  EXPECT_FALSE(chat_ok(chat_body("")).generation.ignore_eos);
  EXPECT_TRUE(chat_ok(chat_body(R"("ignore_eos": true)")).generation.ignore_eos);
  EXPECT_FALSE(chat_ok(chat_body(R"("ignore_eos": false)")).generation.ignore_eos);
  EXPECT_TRUE(completion_ok(R"({"prompt":"p","ignore_eos":true})").generation.ignore_eos);
  chat_error(chat_body(R"("ignore_eos": 1)"), "ignore_eos", "");
}

TEST(OpenAiCodec, ChatResponseLogprobs) {
  TextRequest req = chat_ok(chat_body(R"("logprobs": true, "top_logprobs": 2)"));
  json j = json::parse(chat_response("c", "m", 1, sample_result(), text_output(sample_result()), req));
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "Hi");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(content[0]["bytes"], json({72, 105}));
  ASSERT_EQ(content[1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[1]["top_logprobs"][1]["token"], "!");
  EXPECT_FLOAT_EQ(content[1]["top_logprobs"][1]["logprob"].get<float>(), -2.0f);
  EXPECT_EQ(content[1]["top_logprobs"][1]["bytes"], json({33}));
}

TEST(OpenAiCodec, CompletionResponseShapeAndLogprobs) {
  TextRequest req = completion_ok(R"({"prompt":"p","logprobs":2})");
  json j = json::parse(completion_response("cmpl-1", "m", 2, sample_result(), req));
  EXPECT_EQ(j["object"], "text_completion");
  const json& c = j["choices"][0];
  EXPECT_EQ(c["text"], "Hi there");
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(c["logprobs"]["tokens"], json({"Hi", " there"}));
  EXPECT_FLOAT_EQ(c["logprobs"]["token_logprobs"][1].get<float>(), -0.25f);
  EXPECT_EQ(c["logprobs"]["text_offset"], json({0, 2}));
  EXPECT_FLOAT_EQ(c["logprobs"]["top_logprobs"][0]["Yo"].get<float>(), -1.5f);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  req = completion_ok(R"({"prompt":"p"})");
  j = json::parse(completion_response("cmpl-1", "m", 2, sample_result(), req));
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
}

// Two choices: each its own entry with its index, finish reason and logprobs; usage counts the
// prompt once and both choices' tokens.
TEST(OpenAiCodec, ResponsesWithSeveralChoices) {
  backend::GenerationResult second = sample_result();
  second.text = "Yo";
  second.tokens = {12};
  second.finish = FinishReason::kEndOfGeneration;
  second.logprobs = {{12, "Yo", -1.5f, {}}};
  backend::GenerationResult r = sample_result();
  r.choices = {sample_result(), second};

  TextRequest req = chat_ok(chat_body(R"("n": 2, "logprobs": true)"));
  std::vector<backend::ChatOutput> outputs = {text_output(r.choices[0]), text_output(second)};
  json j = json::parse(chat_response("c", "m", 1, r, outputs, req));
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hi there");
  EXPECT_EQ(j["choices"][1]["message"]["content"], "Yo");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][1]["logprobs"]["content"].size(), 1u);
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 5},
                              {"completion_tokens", 3},
                              {"total_tokens", 8},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));

  req = completion_ok(R"({"prompt":"p","n":2,"logprobs":1})");
  j = json::parse(completion_response("x", "m", 1, r, req));
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["text"], "Yo");
  EXPECT_EQ(j["choices"][1]["logprobs"]["tokens"], json({"Yo"}));
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
}

// Streamed chunks name their choice and carry the logprobs of the tokens they bring.
TEST(OpenAiCodec, StreamChunksCarryIndexAndLogprobs) {
  const auto lps = sample_result().logprobs;
  ChunkChoice c;
  c.index = 1;
  c.logprobs = true;
  c.tokens = lps;
  backend::ChatOutputDelta d;
  d.content = "Hi there";
  json chunk = sse_json(chat_chunk_delta("c", "m", 1, d, c));
  EXPECT_EQ(chunk["choices"][0]["index"], 1);
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "Hi there");
  const json& content = chunk["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[1]["token"], " there");
  EXPECT_FLOAT_EQ(content[1]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(sse_json(chat_chunk_role("c", "m", 1, 1))["choices"][0]["index"], 1);
  ChunkChoice second;
  second.index = 1;
  json fin = sse_json(chat_chunk_finish("c", "m", 1, "stop", second));
  EXPECT_EQ(fin["choices"][0]["index"], 1);
  EXPECT_TRUE(fin["choices"][0]["logprobs"].is_null());
  EXPECT_TRUE(sse_json(chat_chunk_delta("c", "m", 1, d))["choices"][0]["logprobs"].is_null());

  c.top_logprobs = 1;
  c.text_offset = 10;
  json text = sse_json(completion_chunk_text("x", "m", 1, "Hi there", c));
  EXPECT_EQ(text["choices"][0]["index"], 1);
  EXPECT_EQ(text["choices"][0]["logprobs"]["tokens"], json({"Hi", " there"}));
  EXPECT_EQ(text["choices"][0]["logprobs"]["text_offset"], json({10, 12})) << "offsets in the choice's text";
  EXPECT_FLOAT_EQ(text["choices"][0]["logprobs"]["top_logprobs"][1]["!"].get<float>(), -2.0f);
  EXPECT_EQ(
      sse_json(completion_chunk_finish("x", "m", 1, FinishReason::kMaxTokens, second))["choices"][0]["index"],
      1);
}

TEST(OpenAiCodec, InvalidUtf8IsReplacedNotThrown) {
  backend::GenerationResult g = sample_result();
  g.text = "ab\xE2\x82";  // cut inside a 3-byte character
  g.logprobs[0].text = "\xE2\x82";
  TextRequest req = chat_ok(chat_body(R"("logprobs": true)"));
  std::string body;
  ASSERT_NO_THROW(body = chat_response("c", "m", 1, g, text_output(g), req));
  json j = json::parse(body);
  EXPECT_EQ(j["choices"][0]["message"]["content"].get<std::string>().substr(0, 2), "ab");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["bytes"], json({0xE2, 0x82})) << "bytes are exact";
  EXPECT_NO_THROW(sse_json(chat_chunk_text("c", "m", 1, "\xFF")));
}

TEST(OpenAiCodec, ChatStreamChunks) {
  json role = sse_json(chat_chunk_role("id1", "m", 3));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["id"], "id1");
  EXPECT_EQ(role["created"], 3);
  EXPECT_EQ(role["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  json text = sse_json(chat_chunk_text("id1", "m", 3, "line one\nline two"));
  EXPECT_EQ(text["choices"][0]["delta"]["content"], "line one\nline two")
      << "newlines are escaped in the event";
  EXPECT_TRUE(text["choices"][0]["finish_reason"].is_null());
  json fin =
      sse_json(chat_chunk_finish("id1", "m", 3, chat_finish_reason(FinishReason::kEndOfGeneration, {})));
  EXPECT_TRUE(fin["choices"][0]["delta"].is_object());
  EXPECT_TRUE(fin["choices"][0]["delta"].empty());
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  json usage = sse_json(usage_chunk("id1", "m", 3, Endpoint::kChat, 4, 6));
  EXPECT_EQ(usage["object"], "chat.completion.chunk");
  EXPECT_TRUE(usage["choices"].is_array());
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], json({{"prompt_tokens", 4},
                                  {"completion_tokens", 6},
                                  {"total_tokens", 10},
                                  {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(OpenAiCodec, CompletionStreamChunks) {
  json text = sse_json(completion_chunk_text("c2", "m", 9, "abc"));
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "abc");
  EXPECT_TRUE(text["choices"][0]["finish_reason"].is_null());
  json fin = sse_json(completion_chunk_finish("c2", "m", 9, FinishReason::kMaxTokens));
  EXPECT_EQ(fin["choices"][0]["text"], "");
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  json usage = sse_json(usage_chunk("c2", "m", 9, Endpoint::kCompletion, 1, 2));
  EXPECT_EQ(usage["object"], "text_completion");
  EXPECT_EQ(usage["usage"]["total_tokens"], 3);
}

// A reference decoder, to check the encoder against.
std::string base64_decode(const std::string& s) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t buf = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const auto v = alphabet.find(c);
    EXPECT_NE(v, std::string::npos) << "bad base64 character " << c;
    buf = (buf << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xFF);
    }
  }
  return out;
}

TEST(OpenAiCodec, Base64KnownVectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xFF\xFE\x00", 3)), "//4A");
}

TEST(OpenAiCodec, EmbeddingsResponseFloatAndBase64RoundTrip) {
  const std::vector<std::vector<float>> v = {{1.0f, -2.5f, 0.1f}, {3.25f, 0.0f, -1e-20f}};
  json f = json::parse(embeddings_response("emb", v, false, 7));
  EXPECT_EQ(f["object"], "list");
  EXPECT_EQ(f["model"], "emb");
  EXPECT_EQ(f["usage"], json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  ASSERT_EQ(f["data"].size(), 2u);
  EXPECT_EQ(f["data"][1]["object"], "embedding");
  EXPECT_EQ(f["data"][1]["index"], 1);
  EXPECT_EQ(f["data"][0]["embedding"].size(), 3u);
  EXPECT_EQ(f["data"][0]["embedding"][1].get<float>(), -2.5f);
  EXPECT_EQ(f["data"][0]["embedding"][2].get<float>(), 0.1f) << "floats survive the text form exactly";

  json b = json::parse(embeddings_response("emb", v, true, 7));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string bytes = base64_decode(b["data"][i]["embedding"].get<std::string>());
    ASSERT_EQ(bytes.size(), v[i].size() * 4);
    for (size_t k = 0; k < v[i].size(); ++k) {
      // little-endian float32
      const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + 4 * k);
      const uint32_t u = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
      float x;
      std::memcpy(&x, &u, 4);
      EXPECT_EQ(x, v[i][k]) << "vector " << i << " element " << k;
    }
  }
}

TEST(OpenAiCodec, ModelsResponse) {
  const std::vector<ModelEntry> models = {{"a", 10, "gantry"}, {"b", 20, "me"}};
  json j = json::parse(models_response(models));
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1], json({{"id", "b"}, {"object", "model"}, {"created", 20}, {"owned_by", "me"}}));
  EXPECT_TRUE(json::parse(models_response({}))["data"].empty());
}

namespace {

const char* kTools = R"("tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Weather of a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

}  // namespace

TEST(OpenAiCodec, ToolsToolChoiceAndToolHistory) {
  TextRequest r = chat_ok(std::string(R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "22 C"}], )") +
                          kTools +
                          R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
      "parallel_tool_calls": false})");
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0].name, "get_weather");
  EXPECT_EQ(r.chat.tools[0].description, "Weather of a city");
  EXPECT_EQ(json::parse(r.chat.tools[0].parameters)["required"], json({"city"}));
  EXPECT_EQ(r.chat.forced_tool, "get_weather");
  EXPECT_EQ(r.chat.tool_choice, backend::ToolChoice::kRequired);
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  ASSERT_EQ(r.chat.messages.size(), 3u);
  ASSERT_EQ(r.chat.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.chat.messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.chat.messages[1].tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(r.chat.messages[2].tool_call_id, "call_1");
  EXPECT_FALSE(backend::check_chat_request(r.chat).has_value());

  for (const char* choice : {"auto", "none", "required"}) {
    TextRequest t = chat_ok(std::string(R"({"messages": [{"role": "user", "content": "x"}], )") + kTools +
                            R"(, "tool_choice": ")" + choice + "\"}");
    EXPECT_TRUE(t.chat.forced_tool.empty());
  }
}

TEST(OpenAiCodec, BadToolsAreRefusedNamingTheField) {
  EXPECT_EQ(chat_err(chat_body(R"("tools": {"type": "function"})")).param, "tools");
  EXPECT_EQ(chat_err(chat_body(R"("tools": [{"type": "retrieval"}])")).param, "tools[0].type");
  EXPECT_EQ(chat_err(chat_body(R"("tools": [{"type": "function"}])")).param, "tools[0].function");
  EXPECT_EQ(chat_err(chat_body(R"("tools": [{"type": "function", "function": {"name": 3}}])")).param,
            "tools[0].function.name");
  EXPECT_EQ(
      chat_err(chat_body(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])"))
          .param,
      "tools[0].function.parameters");
  EXPECT_EQ(chat_err(chat_body(R"("tool_choice": "sometimes")")).param, "tool_choice");
  EXPECT_EQ(chat_err(chat_body(R"("tool_choice": {"type": "function"})")).param, "tool_choice");
  EXPECT_EQ(chat_err(R"({"messages": [{"role": "tool", "content": "22 C"}]})").param,
            "messages[0].tool_call_id");
  EXPECT_EQ(chat_err(R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
      "function": {"name": "f", "arguments": "not json"}}]}]})")
                .param,
            "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(chat_err(R"({"messages": [{"role": "user", "content": [{"type": "image_url",
      "image_url": {"url": "http://x/y.png"}}]}]})")
                .param,
            "messages[0].content[0].type");

  // Well-formed JSON that no model can honour: the backend-neutral check names the field.
  TextRequest undeclared = chat_ok(chat_body(
      std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"));
  auto e = backend::check_chat_request(undeclared.chat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "tool_choice");
  TextRequest orphan = chat_ok(R"({"messages": [{"role": "user", "content": "x"},
      {"role": "tool", "tool_call_id": "call_9", "content": "22 C"}]})");
  e = backend::check_chat_request(orphan.chat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "messages[1].tool_call_id");
  TextRequest required_without_tools = chat_ok(chat_body(R"("tool_choice": "required")"));
  e = backend::check_chat_request(required_without_tools.chat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "tool_choice");
  TextRequest twice = chat_ok(chat_body(R"("tools": [{"type": "function", "function": {"name": "f"}},
      {"type": "function", "function": {"name": "f"}}])"));
  e = backend::check_chat_request(twice.chat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "tools[1].function.name");
}

TEST(OpenAiCodec, ToolCallsInTheAnswerAndItsStream) {
  TextRequest req = chat_ok(chat_body(kTools));
  backend::GenerationResult g = sample_result();
  g.finish = FinishReason::kEndOfGeneration;
  backend::ChatOutput out;
  out.tool_calls = {{"call_abc", "get_weather", R"({"city":"Paris"})"}};
  json j = json::parse(chat_response("c", "m", 1, g, out, req));
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0],
            json({{"id", "call_abc"},
                  {"type", "function"},
                  {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}}));
  EXPECT_EQ(chat_finish_reason(FinishReason::kMaxTokens, out), "length") << "a cut-off call is not a call";

  backend::ChatOutputDelta head;
  head.tool_index = 0;
  head.tool_call = {"call_abc", "get_weather", ""};
  json first = sse_json(chat_chunk_delta("c", "m", 1, head));
  EXPECT_EQ(first["choices"][0]["delta"]["tool_calls"][0],
            json({{"index", 0},
                  {"id", "call_abc"},
                  {"type", "function"},
                  {"function", {{"name", "get_weather"}, {"arguments", ""}}}}));
  backend::ChatOutputDelta frag;
  frag.tool_index = 0;
  frag.tool_call.arguments = R"({"ci)";
  json second = sse_json(chat_chunk_delta("c", "m", 1, frag));
  EXPECT_EQ(second["choices"][0]["delta"]["tool_calls"][0],
            json({{"index", 0}, {"function", {{"arguments", R"({"ci)"}}}}));
  backend::ChatOutputDelta thinking;
  thinking.reasoning_content = "hmm";
  EXPECT_EQ(sse_json(chat_chunk_delta("c", "m", 1, thinking))["choices"][0]["delta"],
            json({{"reasoning_content", "hmm"}}));
}

TEST(ChatDeltaTracker, AnnouncesACallOnceItsNameIsCompleteThenStreamsArguments) {
  backend::ChatDeltaTracker t;
  backend::ChatOutput o;
  o.content = "Let me check.";
  auto d = t.update(o, false);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].content, "Let me check.");
  o.tool_calls = {{"id1", "get_wea", ""}};
  EXPECT_TRUE(t.update(o, false).empty()) << "a name that may still grow is held back";
  o.tool_calls[0] = {"id1", "get_weather", "{\"ci"};
  d = t.update(o, false);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].tool_index, 0u);
  EXPECT_EQ(d[0].tool_call.name, "get_weather");
  EXPECT_EQ(d[0].tool_call.id, "id1");
  EXPECT_EQ(d[1].tool_call.arguments, "{\"ci");
  EXPECT_TRUE(d[1].tool_call.name.empty());
  o.tool_calls[0].arguments = "{\"city\":\"Paris\"}";
  o.tool_calls.push_back({"id2", "get_time", ""});
  d = t.update(o, true);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].tool_call.arguments, "ty\":\"Paris\"}");
  EXPECT_EQ(d[1].tool_index, 1u);
  EXPECT_EQ(d[1].tool_call.name, "get_time") << "the final update announces every call";
}

}  // namespace
}  // namespace gantry::protocol::openai
