// The Anthropic Messages codec: request fields and their errors, block translation into a ChatRequest,
// the answer's shape, and the streamed event sequence.
#include "gantry/protocol/anthropic_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gantry::protocol::anthropic {
namespace {

using backend::FinishReason;
using nlohmann::json;

MessagesRequest ok(const std::string& body, Endpoint endpoint = Endpoint::kMessages) {
  auto r = parse_messages_request(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->message;
    return {};
  }
  return std::get<MessagesRequest>(r);
}

// Asserts a 400 invalid_request_error naming `field` (in `field` and at the start of the message)
// whose message contains `phrase`.
void expect_error(const std::string& body, const std::string& field, const std::string& phrase = "") {
  auto r = parse_messages_request(body, Endpoint::kMessages);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << "expected an error about " << field << " for " << body;
  const auto& e = std::get<ApiError>(r);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.field, field) << e.message;
  if (!field.empty()) {
    EXPECT_EQ(e.message.rfind(field + ": ", 0), 0u) << e.message;
  }
  EXPECT_NE(e.message.find(phrase), std::string::npos) << e.message;
}

std::string with(const std::string& extra) {
  return R"({"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}])" + extra + "}";
}

TEST(AnthropicCodec, MinimalRequest) {
  auto r = ok(with(""));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.generation.max_tokens, 16);
  EXPECT_FALSE(r.stream);
  ASSERT_EQ(r.chat.messages.size(), 1u);
  EXPECT_EQ(r.chat.messages[0].role, "user");
  EXPECT_EQ(r.chat.messages[0].content, "hi");
  EXPECT_EQ(r.chat.tool_choice, backend::ToolChoice::kAuto);
  EXPECT_EQ(r.chat.reasoning_format, backend::ReasoningFormat::kAuto);
}

TEST(AnthropicCodec, SamplingStopAndStream) {
  auto r = ok(with(R"(,"temperature":0.5,"top_p":0.9,"top_k":7,"stop_sequences":["END","##"],"stream":true,
                     "metadata":{"user_id":"u"},"some_future_field":1)"));
  EXPECT_FLOAT_EQ(r.generation.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.generation.sampling.top_p, 0.9f);
  EXPECT_EQ(r.generation.sampling.top_k, 7);
  EXPECT_EQ(r.stop_sequences, (std::vector<std::string>{"END", "##"}));
  EXPECT_EQ(r.generation.stop, r.stop_sequences);
  EXPECT_TRUE(r.stream);
  EXPECT_FLOAT_EQ(ok(with(R"(,"top_p":0)")).generation.sampling.temperature, 0.0f);  // greedy
}

TEST(AnthropicCodec, FieldErrorsNameTheField) {
  expect_error("[1]", "", "JSON object");
  expect_error(R"({"max_tokens":4,"messages":[{"role":"user","content":"x"}]})", "model", "required");
  expect_error(R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens", "required");
  expect_error(R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens",
               "1..");
  expect_error(R"({"model":"m","max_tokens":4})", "messages", "required");
  expect_error(R"({"model":"m","max_tokens":4,"messages":[]})", "messages", "empty");
  expect_error(R"({"model":"m","max_tokens":4,"messages":[{"role":"system","content":"x"}]})",
               "messages[0].role", "'system'");
  expect_error(R"({"model":"m","max_tokens":4,"messages":[{"role":"user"}]})", "messages[0].content",
               "required");
  expect_error(with(R"(,"temperature":1.5)"), "temperature", "0..1");
  expect_error(with(R"(,"top_k":-1)"), "top_k");
  expect_error(with(R"(,"stream":"yes")"), "stream", "boolean");
  expect_error(with(R"(,"stop_sequences":"END")"), "stop_sequences", "array");
  expect_error(with(R"(,"stop_sequences":["a",""])"), "stop_sequences[1]", "non-empty");
  expect_error(with(R"(,"system":[{"type":"image"}])"), "system[0].type", "not supported");
  expect_error(with(R"(,"system":7)"), "system", "string or an array");
  expect_error(with(R"(,"metadata":"x")"), "metadata", "object");
  expect_error(with(R"(,"thinking":{"type":"sometimes"})"), "thinking.type");
  expect_error(with(R"(,"thinking":{"type":"enabled","budget_tokens":0})"), "thinking.budget_tokens");
}

TEST(AnthropicCodec, ImageAndDocumentBlocksAre400sNamingTheBlock) {
  expect_error(
      R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"see"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]})",
      "messages[0].content[1].type", "\"image\" blocks are not supported");
  expect_error(R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"document",
      "source":{"type":"text","data":"x"}}]}]})",
               "messages[0].content[0].type", "\"document\"");
  expect_error(R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"q"},{"role":"assistant",
      "content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":
      "tool_result","tool_use_id":"t1","content":[{"type":"image","source":{}}]}]}]})",
               "messages[2].content[0].content[0].type", "image");
  expect_error(
      R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"server_tool_use"}]}]})",
      "messages[0].content[0].type", "not supported");
}

TEST(AnthropicCodec, ToolBlocksBecomeToolCallsAndToolMessages) {
  auto r = ok(R"({"model":"m","max_tokens":32,"system":[{"type":"text","text":"Be brief."},
      {"type":"text","text":"Use tools.","cache_control":{"type":"ephemeral"}}],
      "messages":[
        {"role":"user","content":"Weather in Paris and London?"},
        {"role":"assistant","content":[{"type":"thinking","thinking":"Two calls.","signature":"s"},
          {"type":"text","text":"Checking."},
          {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
          {"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"London"}}]},
        {"role":"user","content":[
          {"type":"tool_result","tool_use_id":"toolu_1","content":"21 C"},
          {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"rain"}],"is_error":true},
          {"type":"text","text":"Summarise."}]}],
      "tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object",
        "properties":{"city":{"type":"string"}}}}],
      "tool_choice":{"type":"any","disable_parallel_tool_use":true}})");
  ASSERT_EQ(r.chat.messages.size(), 6u);
  ASSERT_EQ(r.origins.size(), 6u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[0].content, "Be brief.\nUse tools.");
  EXPECT_EQ(r.origins[0].path, "system");
  EXPECT_EQ(r.chat.messages[1].role, "user");
  const auto& a = r.chat.messages[2];
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content, "Checking.");
  EXPECT_EQ(a.reasoning_content, "Two calls.");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].id, "toolu_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(a.tool_calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(r.origins[2].calls,
            (std::vector<std::string>{"messages[1].content[2]", "messages[1].content[3]"}));
  EXPECT_EQ(r.chat.messages[3].role, "tool");
  EXPECT_EQ(r.chat.messages[3].tool_call_id, "toolu_1");
  EXPECT_EQ(r.chat.messages[3].content, "21 C");
  EXPECT_EQ(r.origins[3].path, "messages[2].content[0]");
  EXPECT_EQ(r.chat.messages[4].tool_call_id, "toolu_2");
  EXPECT_EQ(r.chat.messages[4].content, "Error: rain");
  EXPECT_EQ(r.chat.messages[5].role, "user");  // the text after the results, in order
  EXPECT_EQ(r.chat.messages[5].content, "Summarise.");
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0].name, "get_weather");
  EXPECT_EQ(r.chat.tools[0].description, "Weather");
  EXPECT_EQ(json::parse(r.chat.tools[0].parameters)["properties"]["city"]["type"], "string");
  EXPECT_EQ(r.chat.tool_choice, backend::ToolChoice::kRequired);
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_FALSE(backend::check_chat_request(r.chat).has_value());
}

TEST(AnthropicCodec, ToolChoiceAndThinking) {
  const std::string tools = R"(,"tools":[{"name":"f","input_schema":{"type":"object"}}])";
  auto named = ok(with(tools + R"(,"tool_choice":{"type":"tool","name":"f"})"));
  EXPECT_EQ(named.chat.forced_tool, "f");
  EXPECT_EQ(named.chat.tool_choice, backend::ToolChoice::kRequired);
  EXPECT_EQ(ok(with(tools + R"(,"tool_choice":{"type":"none"})")).chat.tool_choice,
            backend::ToolChoice::kNone);
  EXPECT_EQ(ok(with(tools + R"(,"tool_choice":{"type":"auto"})")).chat.tool_choice,
            backend::ToolChoice::kAuto);
  EXPECT_TRUE(ok(with(tools)).chat.parallel_tool_calls);
  expect_error(with(tools + R"(,"tool_choice":"any")"), "tool_choice", "\"any\"");
  expect_error(with(tools + R"(,"tool_choice":{"type":"tool"})"), "tool_choice.name", "required");
  expect_error(with(tools + R"(,"tool_choice":{"type":"function"})"), "tool_choice.type");
  EXPECT_FALSE(ok(with(R"(,"thinking":{"type":"disabled"})")).chat.enable_thinking);
  EXPECT_TRUE(ok(with(R"(,"thinking":{"type":"enabled","budget_tokens":2048})")).chat.enable_thinking);
}

TEST(AnthropicCodec, BadToolsAndBlocksNameTheField) {
  expect_error(with(R"(,"tools":{})"), "tools", "array");
  expect_error(with(R"(,"tools":[{"input_schema":{"type":"object"}}])"), "tools[0].name", "required");
  expect_error(with(R"(,"tools":[{"name":"f"}])"), "tools[0].input_schema", "required");
  expect_error(with(R"(,"tools":[{"name":"f","input_schema":"object"}])"), "tools[0].input_schema");
  expect_error(with(R"(,"tools":[{"type":"web_search_20250305","name":"web_search"}])"), "tools[0].type",
               "not supported");
  const std::string head = R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"q"},)";
  expect_error(
      head + R"({"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]})",
      "messages[1].content[0].input", "object");
  expect_error(head + R"({"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]})",
               "messages[1].content[0].id");
  expect_error(head + R"({"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t"}]}]})",
               "messages[1].content[0].type", "assistant message");
  expect_error(
      R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t",
      "name":"f","input":{}}]}]})",
      "messages[0].content[0].type", "user message");
  expect_error(
      R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]})",
      "messages[0].content[0].tool_use_id", "required");
  expect_error(R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text"}]}]})",
               "messages[0].content[0].text", "required");
}

TEST(AnthropicCodec, ChatLayerFieldsMapToTheRequestsOwn) {
  auto r = ok(R"({"model":"m","max_tokens":4,"system":"s","messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"f","input":{}}]},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"nope"}]}],
      "tools":[{"name":"f","input_schema":{"type":"object"}}]})");
  auto e = backend::check_chat_request(r.chat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(request_field(r, e->field), "messages[2].content[1].tool_use_id") << e->field;
  EXPECT_EQ(request_field(r, "messages[2].tool_calls[0]"), "messages[1].content[1]");
  EXPECT_EQ(request_field(r, "messages[0]"), "system");
  EXPECT_EQ(request_field(r, "tools[3].function.name"), "tools[3].name");
  EXPECT_EQ(request_field(r, "tool_choice"), "tool_choice");

  auto bad_name = ok(with(R"(,"tools":[{"name":"has space","input_schema":{"type":"object"}}])"));
  auto e2 = backend::check_chat_request(bad_name.chat);
  ASSERT_TRUE(e2.has_value());
  EXPECT_EQ(request_field(bad_name, e2->field), "tools[0].name");

  // A refusal of the one chat entry (backend::prepare_chat: the field split off the template's message).
  ApiError schema = api_error(InvalidArgument("keyword 'pattern' is not supported"),
                              request_field(r, "tools[0].function.parameters"));
  EXPECT_EQ(schema.http_status, 400);
  EXPECT_EQ(schema.field, "tools[0].input_schema");
  EXPECT_EQ(schema.message, "tools[0].input_schema: keyword 'pattern' is not supported");
  ApiError refused = api_error(InvalidArgument("the model's chat template refused the conversation"),
                               request_field(r, "messages"));
  EXPECT_EQ(refused.field, "messages");
}

TEST(AnthropicCodec, CountTokensNeedsNoMaxTokens) {
  auto r = ok(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})", Endpoint::kCountTokens);
  EXPECT_EQ(r.endpoint, Endpoint::kCountTokens);
  EXPECT_EQ(r.chat.messages.size(), 1u);
  EXPECT_EQ(json::parse(count_tokens_response(12)), json({{"input_tokens", 12}}));
}

TEST(AnthropicCodec, ErrorsInAnthropicsShape) {
  ApiError e = api_error(ResourceExhausted("the queue is full"));
  EXPECT_EQ(e.http_status, 429);
  EXPECT_EQ(e.type, "rate_limit_error");
  json body = json::parse(error_body(e));
  // request_id: required (string | null) in the SDK's ErrorResponse; a fresh "req_" id each.
  ASSERT_TRUE(body["request_id"].is_string());
  EXPECT_EQ(body["request_id"].get<std::string>().rfind("req_", 0), 0u);
  body.erase("request_id");
  EXPECT_EQ(body, json({{"type", "error"},
                        {"error", {{"type", "rate_limit_error"}, {"message", "the queue is full"}}}}));
  EXPECT_EQ(api_error(NotFound("no model"), "model").type, "not_found_error");
  EXPECT_EQ(api_error(NotFound("no model"), "model").message, "model: no model");
  EXPECT_EQ(api_error(Unavailable("loading")).http_status, 503);
  EXPECT_EQ(bad_request("tool_choice", "tool_choice names 'f'").message,
            "tool_choice: tool_choice names 'f'");
  EXPECT_EQ(bad_request("tools", "tools: bad").message, "tools: bad");
  EXPECT_EQ(api_error(Internal("bug")).type, "api_error");
  EXPECT_EQ(error_type(401), "authentication_error");
  EXPECT_EQ(sse_error(e).rfind("event: error\ndata: {", 0), 0u);
}

TEST(AnthropicCodec, ToolUseIdsAndStopReasons) {
  EXPECT_EQ(tool_use_id("call_abc"), "toolu_abc");
  EXPECT_EQ(tool_use_id("toolu_x"), "toolu_x");
  EXPECT_EQ(tool_use_id("123"), "toolu_123");
  EXPECT_EQ(tool_use_id("").rfind("toolu_", 0), 0u);
  EXPECT_EQ(tool_use_id("").size(), 30u);
  EXPECT_EQ(new_message_id().rfind("msg_", 0), 0u);

  backend::ChatOutput text{"hello", "", {}};
  backend::ChatOutput call{"", "", {{"call_1", "f", "{}"}}};
  EXPECT_EQ(stop_reason(FinishReason::kEndOfGeneration, text, {}).reason, "end_turn");
  EXPECT_EQ(stop_reason(FinishReason::kMaxTokens, call, {}).reason, "max_tokens");
  EXPECT_EQ(stop_reason(FinishReason::kEndOfGeneration, call, {}).reason, "tool_use");
  EXPECT_EQ(stop_reason(FinishReason::kStopString, text, {}).reason, "end_turn");  // the format's own stop
  auto one = stop_reason(FinishReason::kStopString, text, {"END"});
  EXPECT_EQ(one.reason, "stop_sequence");
  EXPECT_EQ(one.sequence, "END");
  auto two = stop_reason(FinishReason::kStopString, text, {"A", "B"});
  EXPECT_EQ(two.reason, "stop_sequence");
  EXPECT_FALSE(two.sequence.has_value());
}

TEST(AnthropicCodec, MessageResponse) {
  backend::ChatOutput out{
      "Let me check.", "thinking...", {{"call_abc", "get_weather", R"({"city":"Paris"})"}}};
  json j = json::parse(message_response("msg_1", "m", out, {"tool_use", std::nullopt}, 11, 7));
  EXPECT_EQ(j["id"], "msg_1");
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["content"].size(), 3u);
  EXPECT_EQ(j["content"][0], json({{"type", "thinking"}, {"thinking", "thinking..."}, {"signature", ""}}));
  // The SDK's required-nullable fields are sent as null; a tool_use block names its caller.
  EXPECT_EQ(j["content"][1], json({{"type", "text"}, {"text", "Let me check."}, {"citations", nullptr}}));
  EXPECT_EQ(j["content"][2], json({{"type", "tool_use"},
                                   {"id", "toolu_abc"},
                                   {"name", "get_weather"},
                                   {"input", {{"city", "Paris"}}},
                                   {"caller", {{"type", "direct"}}}}));
  EXPECT_TRUE(j.contains("container") && j["container"].is_null());
  EXPECT_TRUE(j.contains("stop_details") && j["stop_details"].is_null());
  for (const char* k :
       {"cache_creation", "inference_geo", "output_tokens_details", "server_tool_use", "service_tier"})
    EXPECT_TRUE(j["usage"].contains(k)) << k;
  EXPECT_EQ(j["stop_reason"], "tool_use");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"]["input_tokens"], 11);
  EXPECT_EQ(j["usage"]["output_tokens"], 7);
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 0);
  // Anthropic's split: input_tokens are those evaluated, cache_read_input_tokens the cached rest.
  json cached =
      json::parse(message_response("msg_3", "m", {"ab", "", {}}, {"end_turn", std::nullopt}, 11, 2, 8));
  EXPECT_EQ(cached["usage"]["input_tokens"], 3);
  EXPECT_EQ(cached["usage"]["cache_read_input_tokens"], 8);
  EventWriter cw("msg_3", "m");
  cw.start(11);
  const std::string fin = cw.finish({"end_turn", std::nullopt}, 11, 2, 8);
  EXPECT_NE(fin.find(R"("cache_read_input_tokens":8)"), std::string::npos) << fin;
  EXPECT_NE(fin.find(R"("input_tokens":3)"), std::string::npos) << fin;

  json stopped = json::parse(message_response("msg_2", "m", {"ab", "", {}}, {"stop_sequence", "END"}, 1, 2));
  EXPECT_EQ(stopped["stop_sequence"], "END");
  json empty = json::parse(message_response("msg_3", "m", {}, {"end_turn", std::nullopt}, 1, 0));
  EXPECT_EQ(empty["content"], json::array({{{"type", "text"}, {"text", ""}, {"citations", nullptr}}}));
  // Arguments that are not an object (cut by max_tokens) give an empty input, never invalid JSON.
  json cut = json::parse(message_response("msg_4", "m", {"", "", {{"call_x", "f", R"({"ci)"}}},
                                          {"max_tokens", std::nullopt}, 1, 2));
  EXPECT_EQ(cut["content"][0]["input"], json::object());
}

// Splits a stream into (event name, data) pairs, checking each event's framing and that the data's
// "type" is the event's name.
std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << sse.substr(pos);
    if (end == std::string::npos) break;
    const std::string ev = sse.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(ev.rfind("event: ", 0), 0u) << ev;
    const size_t nl = ev.find('\n');
    EXPECT_EQ(ev.substr(nl + 1, 6), "data: ") << ev;
    const std::string name = ev.substr(7, nl - 7);
    json data = json::parse(ev.substr(nl + 7));
    EXPECT_EQ(data["type"], name) << ev;
    out.emplace_back(name, std::move(data));
  }
  return out;
}

backend::ChatOutputDelta content(std::string text) {
  backend::ChatOutputDelta d;
  d.content = std::move(text);
  return d;
}

backend::ChatOutputDelta call_start(size_t index, std::string id, std::string name) {
  backend::ChatOutputDelta d;
  d.tool_index = index;
  d.tool_call.id = std::move(id);
  d.tool_call.name = std::move(name);
  return d;
}

backend::ChatOutputDelta call_args(size_t index, std::string args) {
  backend::ChatOutputDelta d;
  d.tool_index = index;
  d.tool_call.arguments = std::move(args);
  return d;
}

TEST(AnthropicCodec, EventSequenceTextThenAToolCall) {
  EventWriter w("msg_1", "m");
  std::string sse = w.start(9);
  backend::ChatOutputDelta thinking;
  thinking.reasoning_content = "hmm";
  sse += w.add(thinking);
  sse += w.add(content("Let me "));
  sse += w.add(content("check."));
  sse += w.add(backend::ChatOutputDelta{});  // carries nothing: no event
  sse += w.add(call_start(0, "call_abc", "get_weather"));
  sse += w.add(call_args(0, R"({"city":)"));
  sse += w.add(call_args(0, R"("Paris"})"));
  sse += w.finish({"tool_use", std::nullopt}, 10, 5);

  const auto ev = events_of(sse);
  std::vector<std::string> names;
  for (const auto& [n, d] : ev) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "message_start", "ping",                                              //
                       "content_block_start", "content_block_delta", "content_block_stop",   // thinking
                       "content_block_start", "content_block_delta", "content_block_delta",  // text
                       "content_block_stop",                                                 //
                       "content_block_start", "content_block_delta", "content_block_delta",  // tool_use
                       "content_block_stop", "message_delta", "message_stop"}));
  ASSERT_EQ(ev.size(), 15u);
  const json& msg = ev[0].second["message"];
  EXPECT_EQ(msg["id"], "msg_1");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"], json::array());
  EXPECT_EQ(msg["usage"]["input_tokens"], 9);
  EXPECT_EQ(ev[2].second["index"], 0);
  EXPECT_EQ(ev[2].second["content_block"]["type"], "thinking");
  EXPECT_EQ(ev[3].second["delta"], json({{"type", "thinking_delta"}, {"thinking", "hmm"}}));
  EXPECT_EQ(ev[4].second["index"], 0);
  EXPECT_EQ(ev[5].second["index"], 1);
  EXPECT_EQ(ev[5].second["content_block"], json({{"type", "text"}, {"text", ""}, {"citations", nullptr}}));
  EXPECT_EQ(ev[6].second["delta"], json({{"type", "text_delta"}, {"text", "Let me "}}));
  EXPECT_EQ(ev[7].second["delta"]["text"], "check.");
  EXPECT_EQ(ev[8].second["index"], 1);
  EXPECT_EQ(ev[9].second["index"], 2);
  EXPECT_EQ(ev[9].second["content_block"], json({{"type", "tool_use"},
                                                 {"id", "toolu_abc"},
                                                 {"name", "get_weather"},
                                                 {"input", json::object()},
                                                 {"caller", {{"type", "direct"}}}}));
  std::string partial;
  for (size_t i : {10u, 11u}) {
    EXPECT_EQ(ev[i].second["index"], 2);
    EXPECT_EQ(ev[i].second["delta"]["type"], "input_json_delta");
    partial += ev[i].second["delta"]["partial_json"].get<std::string>();
  }
  EXPECT_EQ(json::parse(partial), json({{"city", "Paris"}}));
  EXPECT_EQ(ev[12].second["index"], 2);
  EXPECT_EQ(ev[13].second["delta"], json({{"container", nullptr},
                                          {"stop_details", nullptr},
                                          {"stop_reason", "tool_use"},
                                          {"stop_sequence", nullptr}}));
  EXPECT_EQ(ev[13].second["usage"]["output_tokens"], 5);
  EXPECT_EQ(ev[13].second["usage"]["input_tokens"], 10);
}

TEST(AnthropicCodec, EventSequenceTwoCallsAndAnEmptyAnswer) {
  EventWriter w("msg_2", "m");
  std::string sse = w.start(1);
  sse += w.add(call_start(0, "call_a", "f"));
  sse += w.add(call_args(0, "{}"));
  sse += w.add(call_start(1, "call_b", "g"));
  sse += w.add(call_args(1, "{}"));
  sse += w.finish({"tool_use", std::nullopt}, 1, 2);
  const auto ev = events_of(sse);
  std::vector<std::pair<std::string, int>> blocks;
  for (const auto& [n, d] : ev)
    if (n.rfind("content_block", 0) == 0) blocks.emplace_back(n, d["index"].get<int>());
  EXPECT_EQ(blocks, (std::vector<std::pair<std::string, int>>{{"content_block_start", 0},
                                                              {"content_block_delta", 0},
                                                              {"content_block_stop", 0},
                                                              {"content_block_start", 1},
                                                              {"content_block_delta", 1},
                                                              {"content_block_stop", 1}}));

  // Nothing generated: still one (empty) text block, as the whole answer has.
  EventWriter empty("msg_3", "m");
  const auto ev2 = events_of(empty.start(1) + empty.finish({"max_tokens", std::nullopt}, 1, 0));
  ASSERT_EQ(ev2.size(), 6u);
  EXPECT_EQ(ev2[2].second["content_block"], json({{"type", "text"}, {"text", ""}, {"citations", nullptr}}));
  EXPECT_EQ(ev2[3].first, "content_block_stop");
  EXPECT_EQ(ev2[4].second["delta"]["stop_reason"], "max_tokens");
}

}  // namespace
}  // namespace gantry::protocol::anthropic

namespace gantry::protocol::anthropic {
namespace {

TEST(AnthropicCodec, ModelsApiShape) {
  const std::vector<std::string> ids = {"a", "b"};
  json page = json::parse(models_response(ids, 0));
  EXPECT_EQ(page["first_id"], "a");
  EXPECT_EQ(page["last_id"], "b");
  EXPECT_EQ(page["has_more"], false);
  ASSERT_EQ(page["data"].size(), 2u);
  EXPECT_EQ(page["data"][0], json::parse(model_info("a", 0)));
  EXPECT_EQ(page["data"][1]["type"], "model");
  EXPECT_EQ(page["data"][1]["created_at"], "1970-01-01T00:00:00Z");
  EXPECT_TRUE(page["data"][1]["max_tokens"].is_null());
  json none = json::parse(models_response({}, 0));
  EXPECT_TRUE(none["first_id"].is_null() && none["last_id"].is_null());
  EXPECT_TRUE(none["data"].empty());
}

}  // namespace
}  // namespace gantry::protocol::anthropic
