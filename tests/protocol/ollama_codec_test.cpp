// The Ollama codec: request fields and their errors (options, format, keep_alive, refused fields),
// durations, model names, NDJSON lines and response shapes, and what a GGUF file says about a model.
#include "gantry/protocol/ollama_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gantry/core/json.h"

namespace gantry::protocol::ollama {
namespace {

using backend::FinishReason;
using nlohmann::json;
using std::chrono::milliseconds;
using Kind = backend::OutputConstraint::Kind;

TextRequest ok(const std::string& body, Endpoint endpoint = Endpoint::kGenerate) {
  auto r = parse_text_request(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error for " << body << ": " << e->message;
    return {};
  }
  return std::get<TextRequest>(r);
}

// Asserts a 400 whose message contains `phrase`.
void error(const std::string& body, const std::string& phrase, Endpoint endpoint = Endpoint::kGenerate) {
  SCOPED_TRACE(body);
  auto r = parse_text_request(body, endpoint);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << "expected an error containing '" << phrase << "'";
  const auto& e = std::get<ApiError>(r);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_NE(e.message.find(phrase), std::string::npos) << "message: " << e.message;
}

std::string gen(const std::string& extra) {
  return R"({"model":"m","prompt":"hi")" + (extra.empty() ? "" : "," + extra) + "}";
}

TEST(OllamaCodec, GenerateDefaults) {
  TextRequest r = ok(R"({"model":"tiny","prompt":"Why?"})");
  EXPECT_EQ(r.endpoint, Endpoint::kGenerate);
  EXPECT_EQ(r.model, "tiny");
  EXPECT_EQ(r.prompt, "Why?");
  EXPECT_TRUE(r.stream) << "Ollama streams unless told not to";
  EXPECT_FALSE(r.raw);
  EXPECT_FALSE(r.keep_alive.has_value());
  EXPECT_FALSE(r.num_predict.has_value());
  EXPECT_EQ(r.generation.constraint.kind, Kind::kNone);
  const backend::SamplingParams defaults;
  EXPECT_EQ(r.generation.sampling.temperature, defaults.temperature);
  EXPECT_EQ(r.generation.sampling.seed, defaults.seed);
  EXPECT_FALSE(is_load_only(r));
}

TEST(OllamaCodec, GenerateFields) {
  TextRequest r = ok(gen(R"("system":"be brief","raw":true,"stream":false,"template":"{{ .Prompt }}",)"
                         R"("think":false,"context":[],"images":[],"suffix":"")"));
  EXPECT_EQ(r.system, "be brief");
  EXPECT_TRUE(r.raw);
  EXPECT_FALSE(r.stream);
  // The older "name" names the model when "model" is absent.
  EXPECT_EQ(ok(R"({"name":"old","prompt":""})").model, "old");
}

TEST(OllamaCodec, Options) {
  TextRequest r = ok(gen(R"("options":{"temperature":0,"top_k":20,"top_p":0.9,"min_p":0.1,)"
                         R"("repeat_penalty":1.2,"presence_penalty":0.5,"frequency_penalty":-1.5,)"
                         R"("repeat_last_n":33,"seed":42,"num_predict":100,)"
                         R"("num_ctx":4096,"stop":["\n","user:",""],"mirostat":1,"num_thread":8})"));
  const auto& sp = r.generation.sampling;
  EXPECT_EQ(sp.temperature, 0.0f);
  EXPECT_EQ(sp.top_k, 20);
  EXPECT_FLOAT_EQ(sp.top_p, 0.9f);
  EXPECT_FLOAT_EQ(sp.min_p, 0.1f);
  EXPECT_FLOAT_EQ(sp.repeat_penalty, 1.2f);
  EXPECT_FLOAT_EQ(sp.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(sp.frequency_penalty, -1.5f);
  EXPECT_EQ(sp.repeat_last_n, 33);
  EXPECT_EQ(sp.seed, 42u);
  EXPECT_EQ(r.num_predict, 100);
  EXPECT_EQ(r.num_ctx, 4096);
  EXPECT_EQ(r.generation.stop, (std::vector<std::string>{"\n", "user:"}));

  EXPECT_EQ(ok(gen(R"("options":{"seed":-1})")).generation.sampling.seed, 0xFFFFFFFFu) << "-1: random";
  EXPECT_EQ(ok(gen(R"("options":{"seed":4294967297})")).generation.sampling.seed, 1u) << "modulo 2^32";
  EXPECT_EQ(ok(gen(R"("options":{"num_predict":-1})")).num_predict, -1);
  EXPECT_EQ(ok(gen(R"("options":{"num_predict":-2})")).num_predict, -2);
  EXPECT_FALSE(ok(gen(R"("options":{"num_predict":0})")).num_predict.has_value()) << "0: the default";
  EXPECT_EQ(ok(gen(R"("options":{"num_predict":64.0})")).num_predict, 64) << "an integral float";
  EXPECT_EQ(ok(gen(R"("options":{"stop":"END"})")).generation.stop, (std::vector<std::string>{"END"}));
  EXPECT_EQ(ok(gen(R"("options":null)")).num_predict, std::nullopt);
}

TEST(OllamaCodec, OptionErrorsNameTheOption) {
  error(gen(R"("options":[])"), "'options' must be an object");
  error(gen(R"("options":{"top_k":1,"top_k":2})"), "duplicate key 'top_k'");
  error(gen(R"("options":{"temperature":"hot"})"), "'options.temperature' must be a number");
  error(gen(R"("options":{"temperature":-1})"), "temperature");
  error(gen(R"("options":{"top_p":0})"), "top_p");
  error(gen(R"("options":{"top_k":-3})"), "'options.top_k' must be an integer in 0..");
  error(gen(R"("options":{"num_predict":1.5})"), "'options.num_predict' must be an integer");
  error(gen(R"("options":{"num_predict":"10"})"), "'options.num_predict' must be an integer");
  error(gen(R"("options":{"num_predict":1e300})"), "'options.num_predict' must be an integer");
  error(gen(R"("options":{"seed":1.25})"), "'options.seed'");
  error(gen(R"("options":{"stop":[1]})"), "'options.stop' must be a string or an array of strings");
  error(gen(R"("options":{"stop":{}})"), "'options.stop' must be a string or an array of strings");
  error(gen(R"("options":{"num_ctx":-5})"), "'options.num_ctx'");
  error(gen(R"("options":{"presence_penalty":"x"})"), "'options.presence_penalty' must be a number");
  error(gen(R"("options":{"presence_penalty":3})"), "presence_penalty must be in [-2, 2]");
  error(gen(R"("options":{"frequency_penalty":-2.5})"), "frequency_penalty must be in [-2, 2]");
}

TEST(OllamaCodec, Format) {
  EXPECT_EQ(ok(gen(R"("format":"json")")).generation.constraint.kind, Kind::kJsonObject);
  EXPECT_EQ(ok(gen(R"("format":"")")).generation.constraint.kind, Kind::kNone);
  TextRequest s =
      ok(gen(R"("format":{"type":"object","properties":{"age":{"type":"integer"}},"required":["age"]})"));
  EXPECT_EQ(s.generation.constraint.kind, Kind::kJsonSchema);
  const json schema = json::parse(s.generation.constraint.json_schema);
  EXPECT_EQ(schema["properties"]["age"]["type"], "integer");
  error(gen(R"("format":"yaml")"), "'format' must be \"json\" or a JSON schema object");
  error(gen(R"("format":3)"), "'format' must be \"json\" or a JSON schema object");
}

TEST(OllamaCodec, KeepAlive) {
  EXPECT_EQ(ok(gen(R"("keep_alive":"5m")")).keep_alive, milliseconds(300'000));
  EXPECT_EQ(ok(gen(R"("keep_alive":0)")).keep_alive, milliseconds(0));
  EXPECT_EQ(ok(gen(R"("keep_alive":"0")")).keep_alive, milliseconds(0));
  EXPECT_EQ(ok(gen(R"("keep_alive":-1)")).keep_alive, milliseconds(-1)) << "negative: forever";
  EXPECT_EQ(ok(gen(R"("keep_alive":"-1")")).keep_alive, milliseconds(-1));
  EXPECT_EQ(ok(gen(R"("keep_alive":"-1m")")).keep_alive, milliseconds(-1));
  EXPECT_EQ(ok(gen(R"("keep_alive":30)")).keep_alive, milliseconds(30'000)) << "a number is seconds";
  EXPECT_EQ(ok(gen(R"("keep_alive":1.5)")).keep_alive, milliseconds(1'500));
  EXPECT_EQ(ok(gen(R"("keep_alive":1e30)")).keep_alive, milliseconds(-1)) << "beyond a century: forever";
  error(gen(R"("keep_alive":"soon")"), "'keep_alive': invalid duration 'soon'");
  error(gen(R"("keep_alive":true)"), "'keep_alive' must be a duration");
}

TEST(OllamaCodec, Durations) {
  struct Case {
    const char* text;
    int64_t ms;
  } cases[] = {{"0", 0},        {"300", 300'000}, {"5m", 300'000},   {"1h30m", 5'400'000},
               {"1.5s", 1'500}, {"300ms", 300},   {"2h", 7'200'000}, {"+10s", 10'000},
               {"1500us", 2},   {"1000000ns", 1}, {" 10s ", 10'000}, {"-5m", -1},
               {"-0", 0},       {"-1", -1},       {".5s", 500},      {"1m0.5s", 60'500}};
  for (const auto& c : cases) {
    auto d = parse_duration(c.text);
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.status().to_string();
    EXPECT_EQ(d->count(), c.ms) << c.text;
  }
  for (const char* bad : {"", "-", "m", "5x", "5m3", "1..5s", ".s", "s5", "five", "5 m", "1e3s"}) {
    auto d = parse_duration(bad);
    EXPECT_FALSE(d.ok()) << "'" << bad << "' was accepted as " << (d.ok() ? d->count() : 0) << " ms";
  }
}

TEST(OllamaCodec, RefusedFields) {
  error(gen(R"("images":["aGVsbG8="])"), "'images' is not supported");
  error(gen(R"("suffix":"    return result")"), "'suffix' is not supported");
  error(gen(R"("context":[1,2,3])"), "'context' is not supported");
  error(R"({"model":"m","messages":[{"role":"user","content":"x","images":["aGk="]}]})",
        "'images' is not supported", Endpoint::kChat);
}

TEST(OllamaCodec, BadBodies) {
  error("", "not valid JSON");
  error("{", "not valid JSON");
  error("[1]", "must be a JSON object");
  error(R"({"prompt":"x"})", "'model' is required");
  error(R"({"model":""})", "'model' is required");
  error(R"({"model":3})", "'model' must be a string");
  error(gen(R"("stream":"yes")"), "'stream' must be a boolean");
  error(R"({"model":"m","prompt":5})", "'prompt' must be a string");
}

TEST(OllamaCodec, DeepJsonIsA400NotACrash) {
  const auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // A 100,000-deep `format` schema used to overflow the stack when it was copied and dumped.
  error(gen(R"("format": {"type": "object", "default": )" + nested(100000) + "}"),
        "JSON nests deeper than 64 levels");
  error(R"({"model":"m","messages":[{"role":"user","content":"x"}],"format":)" + nested(65) + "}",
        "JSON nests deeper than 64 levels", Endpoint::kChat);
  for (bool legacy : {false, true}) {
    auto e = parse_embed_request(R"({"model":"m","input":)" + nested(100000) + "}", legacy);
    ASSERT_TRUE(std::holds_alternative<ApiError>(e));
    EXPECT_EQ(std::get<ApiError>(e).http_status, 400);
    EXPECT_NE(std::get<ApiError>(e).message.find("nests deeper than 64 levels"), std::string::npos);
  }
  error(gen(R"("options": {"temperature": 1e6079})"), "not valid JSON");
  // Up to the limit is accepted: the body, "format" and "default" are 3 of the 64 levels.
  EXPECT_EQ(ok(gen(R"("format": {"type": "object", "default": )" + nested(kMaxJsonDepth - 3) + "}"))
                .generation.constraint.kind,
            Kind::kJsonSchema);
}

TEST(OllamaCodec, Chat) {
  TextRequest r = ok(R"({"model":"m","messages":[{"role":"system","content":"be brief"},)"
                     R"({"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[]}],)"
                     R"("stream":false,"format":"json","options":{"temperature":0.5}})",
                     Endpoint::kChat);
  EXPECT_EQ(r.endpoint, Endpoint::kChat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "hi");
  EXPECT_EQ(r.messages[2].content, "") << "null content reads as empty";
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.generation.constraint.kind, Kind::kJsonObject);
  EXPECT_FLOAT_EQ(r.generation.sampling.temperature, 0.5f);
  EXPECT_FALSE(is_load_only(r));

  EXPECT_TRUE(is_load_only(ok(R"({"model":"m","messages":[]})", Endpoint::kChat)));
  EXPECT_TRUE(is_load_only(ok(R"({"model":"m"})", Endpoint::kChat)));
  EXPECT_TRUE(is_load_only(ok(R"({"model":"m","keep_alive":0})")));
  error(R"({"model":"m","messages":{}})", "'messages' must be an array", Endpoint::kChat);
  error(R"({"model":"m","messages":[{"content":"x"}]})", "'messages[0].role'", Endpoint::kChat);
  error(R"({"model":"m","messages":[{"role":"user","content":[1]}]})",
        "'messages[0].content' must be a string", Endpoint::kChat);
  error(R"({"model":"m","messages":["hi"]})", "'messages[0]' must be an object", Endpoint::kChat);
}

TEST(OllamaCodec, Embed) {
  auto one = parse_embed_request(R"({"model":"e","input":"Why is the sky blue?","keep_alive":"1m"})", false);
  ASSERT_TRUE(std::holds_alternative<EmbedRequest>(one));
  EXPECT_EQ(std::get<EmbedRequest>(one).input, (std::vector<std::string>{"Why is the sky blue?"}));
  EXPECT_EQ(std::get<EmbedRequest>(one).keep_alive, milliseconds(60'000));
  auto two = parse_embed_request(R"({"model":"e","input":["a","b"],"dimensions":8,"truncate":true})", false);
  ASSERT_TRUE(std::holds_alternative<EmbedRequest>(two));
  EXPECT_EQ(std::get<EmbedRequest>(two).input.size(), 2u);
  EXPECT_EQ(std::get<EmbedRequest>(two).dimensions, 8);
  auto none = parse_embed_request(R"({"model":"e","input":[]})", false);
  ASSERT_TRUE(std::holds_alternative<EmbedRequest>(none));
  EXPECT_TRUE(std::get<EmbedRequest>(none).input.empty());
  auto legacy = parse_embed_request(R"({"model":"e","prompt":"hello"})", true);
  ASSERT_TRUE(std::holds_alternative<EmbedRequest>(legacy));
  EXPECT_EQ(std::get<EmbedRequest>(legacy).input, (std::vector<std::string>{"hello"}));

  auto expect_bad = [](const std::string& body, const std::string& phrase) {
    auto r = parse_embed_request(body, false);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    EXPECT_NE(std::get<ApiError>(r).message.find(phrase), std::string::npos) << std::get<ApiError>(r).message;
  };
  expect_bad(R"({"model":"e"})", "'input' is required");
  expect_bad(R"({"model":"e","input":3})", "'input' must be a string or an array");
  expect_bad(R"({"model":"e","input":["a",2]})", "'input[1]' must be a string");
  expect_bad(R"({"model":"e","input":"a","dimensions":0})", "'dimensions'");
  expect_bad(R"({"input":"a"})", "'model' is required");
}

TEST(OllamaCodec, Show) {
  auto r = parse_show_request(R"({"model":"tiny:latest","verbose":true})");
  ASSERT_TRUE(std::holds_alternative<ShowRequest>(r));
  EXPECT_EQ(std::get<ShowRequest>(r).model, "tiny:latest");
  EXPECT_TRUE(std::get<ShowRequest>(r).verbose);
  auto old = parse_show_request(R"({"name":"tiny"})");
  ASSERT_TRUE(std::holds_alternative<ShowRequest>(old));
  EXPECT_EQ(std::get<ShowRequest>(old).model, "tiny");
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_show_request("{}")));
}

TEST(OllamaCodec, Names) {
  EXPECT_EQ(tagged_name("tiny-llama"), "tiny-llama:latest");
  EXPECT_EQ(tagged_name("llama3:8b"), "llama3:8b");
  EXPECT_EQ(untagged_name("tiny-llama:latest"), "tiny-llama");
  EXPECT_EQ(untagged_name("tiny-llama"), "");
  EXPECT_EQ(untagged_name(":latest"), "");
  EXPECT_EQ(untagged_name("x:8b"), "");
  // Round trip: what /api/tags lists finds the served name again.
  EXPECT_EQ(untagged_name(tagged_name("tiny-llama")), "tiny-llama");
}

TEST(OllamaCodec, DoneReasonAndTime) {
  EXPECT_EQ(done_reason(FinishReason::kEndOfGeneration), "stop");
  EXPECT_EQ(done_reason(FinishReason::kStopString), "stop");
  EXPECT_EQ(done_reason(FinishReason::kCancelled), "stop");
  EXPECT_EQ(done_reason(FinishReason::kMaxTokens), "length");
  using namespace std::chrono;
  EXPECT_EQ(rfc3339(system_clock::time_point{}), "1970-01-01T00:00:00.000000000Z");
  const auto t = system_clock::time_point{
      duration_cast<system_clock::duration>(seconds(1'700'000'000) + nanoseconds(123'456'789))};
  EXPECT_EQ(rfc3339(t), "2023-11-14T22:13:20.123456789Z");
}

backend::GenerationResult result() {
  backend::GenerationResult r;
  r.text = "Hello";
  r.tokens = {1, 2, 3};
  r.n_prompt_tokens = 7;
  r.finish = FinishReason::kMaxTokens;
  return r;
}

TEST(OllamaCodec, StreamLinesAndFinals) {
  const std::string chunk = generate_chunk("m:latest", "2024-01-01T00:00:00Z", "Hel");
  ASSERT_EQ(chunk.back(), '\n');
  EXPECT_EQ(chunk.find('\n'), chunk.size() - 1) << "one line";
  json c = json::parse(chunk);
  EXPECT_EQ(c["model"], "m:latest");
  EXPECT_EQ(c["response"], "Hel");
  EXPECT_EQ(c["done"], false);
  json cc = json::parse(chat_chunk("m", "t", "lo"));
  EXPECT_EQ(cc["message"]["role"], "assistant");
  EXPECT_EQ(cc["message"]["content"], "lo");
  EXPECT_EQ(cc["done"], false);

  Timing t{5'000'000, 1'000, 2'000, 3'000};
  const std::string fin = generate_final("m", "t", result(), t, "Hello", false);
  EXPECT_NE(fin.back(), '\n');
  json f = json::parse(fin);
  EXPECT_EQ(f["done"], true);
  EXPECT_EQ(f["done_reason"], "length");
  EXPECT_EQ(f["response"], "Hello");
  EXPECT_EQ(f["total_duration"], 5'000'000);
  EXPECT_EQ(f["load_duration"], 1'000);
  EXPECT_EQ(f["prompt_eval_count"], 7);
  EXPECT_EQ(f["prompt_eval_duration"], 2'000);
  // As Ollama counts: only the prompt tokens evaluated, not those the prompt cache held.
  auto cached = result();
  cached.n_cached_tokens = 6;
  EXPECT_EQ(json::parse(generate_final("m", "t", cached, t, "Hello", false))["prompt_eval_count"], 1);
  EXPECT_EQ(f["eval_count"], 3);
  EXPECT_EQ(f["eval_duration"], 3'000);
  const std::string line = chat_final("m", "t", result(), t, nullptr, true);
  ASSERT_EQ(line.back(), '\n');
  json cf = json::parse(line);
  EXPECT_EQ(cf["message"]["content"], "");
  EXPECT_EQ(cf["eval_count"], 3);

  // A token may end inside a UTF-8 character: replaced, never thrown.
  EXPECT_NO_THROW(json::parse(generate_chunk("m", "t", "\xE2\x82")));

  json load = json::parse(load_response(Endpoint::kChat, "m", "t", "load"));
  EXPECT_EQ(load["done_reason"], "load");
  EXPECT_EQ(load["message"]["content"], "");
  json unload = json::parse(load_response(Endpoint::kGenerate, "m", "t", "unload"));
  EXPECT_EQ(unload["done_reason"], "unload");
  EXPECT_EQ(unload["response"], "");
  EXPECT_EQ(unload["done"], true);

  EXPECT_EQ(json::parse(error_body("model 'x' not found"))["error"], "model 'x' not found");
  const std::string err_line = stream_error_line("boom");
  EXPECT_EQ(err_line.back(), '\n');
  EXPECT_EQ(json::parse(err_line)["error"], "boom");
}

TEST(OllamaCodec, ListsAndShow) {
  ModelEntry e;
  e.name = "tiny-llama:latest";
  e.modified_at = "2024-01-01T00:00:00.000000000Z";
  e.size = 9066112;
  e.digest = std::string(64, 'a');
  e.details = {"gguf", "llama", "8.3M", "F16"};
  e.expires_at = "2024-01-01T00:05:00.000000000Z";
  e.size_vram = 0;
  e.context_length = 2048;
  const std::vector<ModelEntry> models = {e};
  json tags = json::parse(tags_response(models));
  ASSERT_EQ(tags["models"].size(), 1u);
  const json& m = tags["models"][0];
  EXPECT_EQ(m["name"], "tiny-llama:latest");
  EXPECT_EQ(m["model"], "tiny-llama:latest");
  EXPECT_EQ(m["size"], 9066112);
  EXPECT_EQ(m["details"]["format"], "gguf");
  EXPECT_EQ(m["details"]["families"], json::array({"llama"}));
  EXPECT_EQ(m["details"]["quantization_level"], "F16");
  EXPECT_FALSE(m.contains("expires_at"));
  json ps = json::parse(ps_response(models));
  EXPECT_EQ(ps["models"][0]["expires_at"], e.expires_at);
  EXPECT_EQ(ps["models"][0]["size_vram"], 0);
  EXPECT_EQ(ps["models"][0]["context_length"], 2048);
  EXPECT_EQ(json::parse(tags_response({}))["models"], json::array());
  ModelEntry unknown_ctx = e;
  unknown_ctx.context_length = 0;
  EXPECT_FALSE(
      json::parse(ps_response(std::vector<ModelEntry>{unknown_ctx}))["models"][0].contains("context_length"));

  ShowInfo info;
  info.modelfile = "FROM tiny-llama\n";
  info.parameters = "num_ctx 2048\n";
  info.template_text = "{{ .Prompt }}";
  info.details = e.details;
  info.model_info_json = R"({"general.architecture":"llama"})";
  info.capabilities = {"completion"};
  json show = json::parse(show_response(info));
  EXPECT_EQ(show["model_info"]["general.architecture"], "llama");
  EXPECT_EQ(show["capabilities"], json::array({"completion"}));
  EXPECT_EQ(show["details"]["family"], "llama");
  EXPECT_EQ(show["parameters"], "num_ctx 2048\n");
  info.model_info_json = "not json";
  EXPECT_EQ(json::parse(show_response(info))["model_info"], json::object());

  EXPECT_EQ(json::parse(version_response("0.6.0"))["version"], "0.6.0");
}

TEST(OllamaCodec, Embeddings) {
  std::vector<std::vector<float>> v = {{3, 4, 12}, {1, 0, 0}};
  Timing t{10, 2, 0, 0};
  json e = json::parse(embed_response("e", v, t, 5));
  ASSERT_EQ(e["embeddings"].size(), 2u);
  EXPECT_EQ(e["embeddings"][0].size(), 3u);
  EXPECT_EQ(e["prompt_eval_count"], 5);
  EXPECT_EQ(e["total_duration"], 10);
  EXPECT_EQ(e["load_duration"], 2);
  EXPECT_EQ(json::parse(embeddings_response({1.5f, 2}))["embedding"], json::array({1.5, 2.0}));

  truncate_embeddings(v, 2);
  ASSERT_EQ(v[0].size(), 2u);
  EXPECT_FLOAT_EQ(v[0][0], 0.6f);
  EXPECT_FLOAT_EQ(v[0][1], 0.8f);
  EXPECT_FLOAT_EQ(v[1][0], 1.0f);
  truncate_embeddings(v, 10);  // more than there are: unchanged
  EXPECT_EQ(v[0].size(), 2u);
}

TEST(OllamaCodec, HumanCountsAndFileTypes) {
  EXPECT_EQ(human_count(8'030'261'248), "8.0B");
  EXPECT_EQ(human_count(137'000'000), "137M");
  EXPECT_EQ(human_count(1'240'000), "1.2M");
  EXPECT_EQ(human_count(27'200'000'000), "27.2B");
  EXPECT_EQ(human_count(12'000), "12K");
  EXPECT_EQ(human_count(999), "999");
  EXPECT_EQ(human_count(1'500'000'000'000), "1.5T");
  EXPECT_EQ(file_type_name(0), "F32");
  EXPECT_EQ(file_type_name(2), "Q4_0");
  EXPECT_EQ(file_type_name(7), "Q8_0");
  EXPECT_EQ(file_type_name(15), "Q4_K_M");
  EXPECT_EQ(file_type_name(32), "BF16");
  EXPECT_EQ(file_type_name(4), "") << "removed types are unknown";
  EXPECT_EQ(file_type_name(9999), "");
}

// What the repository's tiny GGUF (scripts/models/gguf_llama.py) says through the codec.
TEST(OllamaCodec, GgufDetailsOfTinyLlama) {
  const std::string path = GANTRY_DEPS_DIR "/models/tiny-llama.gguf";
  if (!std::filesystem::exists(path)) FAIL() << path << " is missing: run 'make setup' to generate it";
  auto f = model::GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const ModelDetails d = gguf_details(*f);
  EXPECT_EQ(d.format, "gguf");
  EXPECT_EQ(d.family, "llama");
  uint64_t params = f->get_uint("general.parameter_count").value_or(0);
  if (params == 0) {
    for (const auto& t : f->tensors()) params += t.n_elements;
  }
  ASSERT_GT(params, 0u);
  EXPECT_EQ(d.parameter_size, human_count(params));
  if (auto ft = f->get_uint("general.file_type")) {
    EXPECT_EQ(d.quantization_level, file_type_name(*ft));
  } else {
    EXPECT_EQ(d.quantization_level, "F16") << "token_embd and the matrices are F16 in the generated file";
  }
  json info = json::parse(gguf_model_info(*f, false));
  EXPECT_EQ(info["general.architecture"], "llama");
  EXPECT_EQ(info["llama.context_length"], 2048);
  EXPECT_EQ(info["llama.block_count"], 2);
  EXPECT_EQ(info["tokenizer.ggml.tokens"], json::array()) << "arrays stay empty unless verbose";
  EXPECT_FALSE(info.contains("tokenizer.chat_template"));
  json verbose = json::parse(gguf_model_info(*f, true));
  EXPECT_EQ(verbose["tokenizer.ggml.tokens"].size(), 32000u);
  EXPECT_EQ(verbose["tokenizer.ggml.tokens"][1], "<s>");
}

TEST(OllamaCodec, ChatTools) {
  TextRequest r = ok(R"({"model":"m","messages":[{"role":"user","content":"weather?"}],
      "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather in a city",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
        {"function":{"name":"noop"}}]})",
                     Endpoint::kChat);
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather in a city");
  json params = json::parse(r.tools[0].parameters);
  EXPECT_EQ(params["properties"]["city"]["type"], "string");
  EXPECT_EQ(r.tools[1].name, "noop") << "type defaults to function";
  EXPECT_EQ(r.tools[1].parameters, "");
  backend::ChatRequest c = chat_request(r);
  EXPECT_EQ(c.tools.size(), 2u);
  EXPECT_EQ(c.tool_choice, backend::ToolChoice::kAuto) << "Ollama has no tool_choice";
  EXPECT_FALSE(backend::check_chat_request(c).has_value());
}

TEST(OllamaCodec, ChatToolHistory) {
  // Ollama's calls carry no ids: each call gets one, each tool message the id of the call it answers
  // (by tool_name, else in order), so check_chat_request and every template see a linked history.
  TextRequest r = ok(R"({"model":"m","messages":[
      {"role":"user","content":"weather in Paris and the time?"},
      {"role":"assistant","content":"","thinking":"two calls","tool_calls":[
        {"function":{"name":"get_weather","arguments":{"city":"Paris"}}},
        {"function":{"name":"get_time","arguments":{}}}]},
      {"role":"tool","content":"12:00","tool_name":"get_time"},
      {"role":"tool","content":"sunny"}]})",
                     Endpoint::kChat);
  ASSERT_EQ(r.messages.size(), 4u);
  const auto& a = r.messages[1];
  EXPECT_EQ(a.reasoning_content, "two calls");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(a.tool_calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(a.tool_calls[1].arguments, "{}");
  EXPECT_FALSE(a.tool_calls[0].id.empty());
  EXPECT_NE(a.tool_calls[0].id, a.tool_calls[1].id);
  EXPECT_EQ(r.messages[2].tool_call_id, a.tool_calls[1].id) << "matched by tool_name";
  EXPECT_EQ(r.messages[3].tool_call_id, a.tool_calls[0].id) << "the remaining call, in order";
  EXPECT_EQ(r.messages[3].tool_name, "get_weather");
  EXPECT_FALSE(backend::check_chat_request(chat_request(r)).has_value());
  // A JSON text holding an object is accepted too (OpenAI's form).
  TextRequest s = ok(R"({"model":"m","messages":[{"role":"assistant","content":"",
      "tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}]})",
                     Endpoint::kChat);
  EXPECT_EQ(json::parse(s.messages[0].tool_calls[0].arguments), json({{"a", 1}}));
  // A tool result with no call before it is refused by the chat layer's check, naming the message.
  TextRequest orphan = ok(R"({"model":"m","messages":[{"role":"tool","content":"x"}]})", Endpoint::kChat);
  auto e = backend::check_chat_request(chat_request(orphan));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "messages[0]");
}

TEST(OllamaCodec, BadTools) {
  const auto chat = [](const std::string& extra) {
    return R"({"model":"m","messages":[{"role":"user","content":"x"}],)" + extra + "}";
  };
  error(chat(R"("tools":{})"), "'tools' must be an array", Endpoint::kChat);
  error(chat(R"("tools":[3])"), "'tools[0]' must be an object", Endpoint::kChat);
  error(chat(R"("tools":[{"type":"retrieval","function":{"name":"f"}}])"), "'tools[0].type' must be",
        Endpoint::kChat);
  error(chat(R"("tools":[{"type":"function"}])"), "'tools[0].function' must be an object", Endpoint::kChat);
  error(chat(R"("tools":[{"function":{"name":"ok"}},{"function":{"description":"x"}}])"),
        "'tools[1].function.name' must be a non-empty string", Endpoint::kChat);
  error(chat(R"("tools":[{"function":{"name":"f","parameters":"{}"}}])"),
        "'tools[0].function.parameters' must be a JSON schema object", Endpoint::kChat);
  error(chat(R"("tools":[{"function":{"name":"f","description":5}}])"), "'tools[0].function.description'",
        Endpoint::kChat);
  const auto history = [](const std::string& call) {
    return R"({"model":"m","messages":[{"role":"assistant","content":"","tool_calls":[)" + call + "]}]}";
  };
  error(history(R"({"function":{"name":"f","arguments":[1]}})"),
        "'messages[0].tool_calls[0].function.arguments' must be an object", Endpoint::kChat);
  error(history(R"({"function":{"name":"f","arguments":"not json"}})"),
        "'messages[0].tool_calls[0].function.arguments' must be an object", Endpoint::kChat);
  error(history(R"({"function":{"arguments":{}}})"), "'messages[0].tool_calls[0].function.name'",
        Endpoint::kChat);
  error(history(R"("f")"), "'messages[0].tool_calls[0]' must be an object", Endpoint::kChat);
  error(R"({"model":"m","messages":[{"role":"tool","content":"x","tool_name":3}]})",
        "'tool_name' must be a string", Endpoint::kChat);
  // An invalid function name passes the codec and is refused by check_chat_request, naming the field.
  TextRequest r = ok(chat(R"("tools":[{"function":{"name":"bad name!"}}])"), Endpoint::kChat);
  auto e = backend::check_chat_request(chat_request(r));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "tools[0].function.name");
}

TEST(OllamaCodec, Think) {
  const std::string base = R"({"model":"m","messages":[{"role":"user","content":"x"}])";
  EXPECT_FALSE(ok(base + "}", Endpoint::kChat).think.has_value());
  backend::ChatRequest on = chat_request(ok(base + R"(,"think":true})", Endpoint::kChat));
  EXPECT_TRUE(on.enable_thinking);
  EXPECT_EQ(on.reasoning_format, backend::ReasoningFormat::kAuto);
  backend::ChatRequest off = chat_request(ok(base + R"(,"think":false})", Endpoint::kChat));
  EXPECT_FALSE(off.enable_thinking);
  EXPECT_EQ(off.reasoning_format, backend::ReasoningFormat::kNone);
  EXPECT_TRUE(ok(base + R"(,"think":"high"})", Endpoint::kChat).think.value());
  error(base + R"(,"think":"maybe"})", "'think' must be a boolean", Endpoint::kChat);
  error(gen(R"("think":1)"), "'think' must be a boolean");
}

TEST(OllamaCodec, ToolCallAnswers) {
  backend::GenerationResult r;
  r.finish = FinishReason::kEndOfGeneration;
  r.n_prompt_tokens = 5;
  backend::ChatOutput out;
  out.content = "";
  out.reasoning_content = "let me check";
  out.tool_calls.push_back({"call_1", "get_weather", R"({"city":"Paris","days":2})"});
  json f = json::parse(chat_final("m", "t", r, Timing{}, &out, false));
  const json& m = f["message"];
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], "");
  EXPECT_EQ(m["thinking"], "let me check");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  const json& call = m["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  ASSERT_TRUE(call["function"]["arguments"].is_object()) << "Ollama's arguments are an object, not text";
  EXPECT_EQ(call["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(call["function"]["arguments"]["days"], 2);
  EXPECT_EQ(call["function"]["index"], 0);
  // No reasoning, no calls: neither field appears.
  backend::ChatOutput plain;
  plain.content = "hi";
  json p = json::parse(chat_final("m", "t", r, Timing{}, &plain, false));
  EXPECT_FALSE(p["message"].contains("thinking"));
  EXPECT_FALSE(p["message"].contains("tool_calls"));
  EXPECT_EQ(p["message"]["content"], "hi");

  // Streaming: content and thinking deltas as lines; a tool call's fragments carry nothing (the call
  // comes whole, in its own line).
  backend::ChatOutputDelta d;
  d.reasoning_content = "hm";
  json dl = json::parse(chat_delta_chunk("m", "t", d));
  EXPECT_EQ(dl["message"]["thinking"], "hm");
  EXPECT_EQ(dl["message"]["content"], "");
  EXPECT_EQ(dl["done"], false);
  backend::ChatOutputDelta frag;
  frag.tool_index = 0;
  frag.tool_call.arguments = "{\"ci";
  EXPECT_EQ(chat_delta_chunk("m", "t", frag), "");
  std::vector<backend::ToolCall> calls = {{"a", "f", "{}"}, {"b", "g", R"({"x":[1]})"}};
  const std::string tc = chat_tool_calls_chunk("m", "t", std::span(calls).subspan(1), 1);
  ASSERT_EQ(tc.back(), '\n');
  json tl = json::parse(tc);
  ASSERT_EQ(tl["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(tl["message"]["tool_calls"][0]["function"]["name"], "g");
  EXPECT_EQ(tl["message"]["tool_calls"][0]["function"]["index"], 1);
  EXPECT_EQ(tl["message"]["tool_calls"][0]["function"]["arguments"]["x"][0], 1);
  EXPECT_EQ(tl["done"], false);
}

TEST(OllamaCodec, CopyDeletePullRequests) {
  auto c = parse_copy_request(R"({"source":"a","destination":"b:v1"})");
  ASSERT_TRUE(std::holds_alternative<CopyRequest>(c));
  EXPECT_EQ(std::get<CopyRequest>(c).source, "a");
  EXPECT_EQ(std::get<CopyRequest>(c).destination, "b:v1");
  auto no_dest = parse_copy_request(R"({"source":"a"})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(no_dest));
  EXPECT_NE(std::get<ApiError>(no_dest).message.find("'destination' is required"), std::string::npos);
  auto d = parse_delete_request(R"({"model":"a:latest"})");
  ASSERT_TRUE(std::holds_alternative<DeleteRequest>(d));
  EXPECT_EQ(std::get<DeleteRequest>(d).model, "a:latest");
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_delete_request("{}")));
  auto p = parse_pull_request(R"({"model":"tiny","stream":false,"insecure":true})");
  ASSERT_TRUE(std::holds_alternative<PullRequest>(p));
  EXPECT_FALSE(std::get<PullRequest>(p).stream);
  EXPECT_TRUE(parse_pull_request(R"({"name":"tiny"})").index() == 0);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_pull_request(R"({"model":"x","stream":1})")));

  EXPECT_TRUE(valid_model_name("tiny-llama"));
  EXPECT_TRUE(valid_model_name("tiny_2.5:q4"));
  for (const char* bad : {"", "a b", "../x", "a/b", "a:b:c", ":t", "x:", ".hidden"})
    EXPECT_FALSE(valid_model_name(bad)) << bad;
}

TEST(OllamaCodec, ModelPaths) {
  auto p = parse_model_path("tiny");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->host, "registry.ollama.ai");
  EXPECT_EQ(p->name_space, "library");
  EXPECT_EQ(p->model, "tiny");
  EXPECT_EQ(p->tag, "latest");
  EXPECT_EQ(served_name(*p), "tiny");
  auto q = parse_model_path("example.com:5000/me/qwen:0.5b");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->host, "example.com:5000");
  EXPECT_EQ(q->name_space, "me");
  EXPECT_EQ(q->model, "qwen");
  EXPECT_EQ(q->tag, "0.5b");
  EXPECT_EQ(served_name(*q), "me-qwen:0.5b");
  for (const char* bad :
       {"", "a/b/c/d", "../x", "x:", "sp ace", "x/../y", "../library/x", ".h/ns/x", "h/ns/x:.."})
    EXPECT_FALSE(parse_model_path(bad).ok()) << bad;
}

TEST(OllamaCodec, ManifestLayers) {
  const std::string hex(64, 'a');
  auto l = model_layer(R"({"schemaVersion":2,"layers":[
      {"mediaType":"application/vnd.ollama.image.template","digest":"sha256:)" +
                       std::string(64, 'b') + R"(","size":10},
      {"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" +
                       hex + R"(","size":1234}]})");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->digest, "sha256:" + hex);
  EXPECT_EQ(l->size, 1234u);
  EXPECT_EQ(model_layer("[]").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(model_layer(R"({"layers":[]})").status().code(), StatusCode::kCorrupt);
  auto bad_digest = model_layer(
      R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:xyz","size":1}]})");
  EXPECT_FALSE(bad_digest.ok());
  EXPECT_NE(bad_digest.status().message().find("not sha256:<64 hex digits>"), std::string::npos);

  json s = json::parse(pull_status("pulling manifest"));
  EXPECT_EQ(s["status"], "pulling manifest");
  json pr = json::parse(pull_progress("sha256:" + hex, 100, 40));
  EXPECT_EQ(pr["status"], "pulling " + hex.substr(0, 12));
  EXPECT_EQ(pr["digest"], "sha256:" + hex);
  EXPECT_EQ(pr["total"], 100);
  EXPECT_EQ(pr["completed"], 40);
}

}  // namespace
}  // namespace gantry::protocol::ollama
