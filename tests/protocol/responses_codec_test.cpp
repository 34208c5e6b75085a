// The Responses API codec: request fields and their errors, input items as chat messages, the Response
// object, and the event sequence of a stream built from ChatOutputDeltas.
#include "gantry/protocol/responses_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gantry::protocol::responses {
namespace {

using backend::ChatOutputDelta;
using backend::FinishReason;
using nlohmann::json;
using Kind = backend::OutputConstraint::Kind;

ResponsesRequest ok(const std::string& body) {
  auto r = parse_request(body);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->message << " (" << body << ")";
    return {};
  }
  return std::get<ResponsesRequest>(r);
}

// Asserts a 400 naming `param` whose message contains `phrase`.
void error(const std::string& body, const std::string& param, const std::string& phrase) {
  SCOPED_TRACE(body);
  auto r = parse_request(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << "accepted";
  const auto& e = std::get<ApiError>(r);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, param);
  EXPECT_NE(e.message.find(phrase), std::string::npos) << "message: " << e.message;
}

std::string body(const std::string& extra) {
  return R"({"model":"m","input":"hi")" + (extra.empty() ? "" : "," + extra) + "}";
}

TEST(ResponsesCodec, StringInputIsOneUserMessageAndDefaultsEcho) {
  auto r = ok(body(""));
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.chat.messages.size(), 1u);
  EXPECT_EQ(r.chat.messages[0].role, "user");
  EXPECT_EQ(r.chat.messages[0].content, "hi");
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.generation.max_tokens, 0);
  EXPECT_EQ(r.generation.constraint.kind, Kind::kNone);
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["tools"], json::array());
  EXPECT_EQ(r.echo["text"]["format"]["type"], "text");
  EXPECT_EQ(r.echo["instructions"], nullptr);
  EXPECT_EQ(r.echo["previous_response_id"], nullptr);
  EXPECT_EQ(r.echo["max_output_tokens"], nullptr);
  EXPECT_EQ(r.echo["metadata"], json::object());
  EXPECT_EQ(r.echo["store"], true);
}

TEST(ResponsesCodec, SettingsMapToTheGeneration) {
  auto r = ok(body(
      R"("instructions":"be brief","max_output_tokens":7,"temperature":0.5,"top_p":0.9,"stream":true,)"
      R"("store":false,"previous_response_id":"resp_1","metadata":{"k":"v"},"parallel_tool_calls":false,)"
      R"("reasoning":{"effort":"none"},"unknown_field":[1,2],"include":["x"])"));
  EXPECT_EQ(r.instructions, "be brief");
  EXPECT_EQ(r.chat.messages.size(), 1u) << "the instructions are not an input message";
  EXPECT_EQ(r.generation.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.generation.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.generation.sampling.top_p, 0.9f);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_FALSE(r.chat.enable_thinking);
  EXPECT_EQ(r.echo["instructions"], "be brief");
  EXPECT_EQ(r.echo["max_output_tokens"], 7);
  EXPECT_EQ(r.echo["metadata"]["k"], "v");
  EXPECT_EQ(r.echo["previous_response_id"], "resp_1");
  EXPECT_EQ(r.echo["reasoning"]["effort"], "none");
}

TEST(ResponsesCodec, InputItemsBecomeChatMessages) {
  auto r = ok(R"({"model":"m","input":[
      {"role":"developer","content":"rules"},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
      {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
      {"type":"function_call","call_id":"c1","name":"f","arguments":"{\"x\":1}"},
      {"type":"function_call","call_id":"c2","name":"g","arguments":""},
      {"type":"function_call_output","call_id":"c1","output":"one"},
      {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"two"}]},
      {"type":"function_call","call_id":"c3","name":"f","arguments":"{}"}]})");
  const auto& m = r.chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "developer");
  EXPECT_EQ(m[1].content, "ab");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Let me look.");
  EXPECT_EQ(m[2].reasoning_content, "think");
  ASSERT_EQ(m[2].tool_calls.size(), 2u) << "function_call items join the assistant turn before them";
  EXPECT_EQ(m[2].tool_calls[0].id, "c1");
  EXPECT_EQ(m[2].tool_calls[0].name, "f");
  EXPECT_EQ(m[2].tool_calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(m[2].tool_calls[1].id, "c2");
  EXPECT_EQ(m[2].tool_calls[1].arguments, "{}") << "empty arguments are an empty object";
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "c1");
  EXPECT_EQ(m[3].content, "one");
  EXPECT_EQ(m[4].content, "two");
  EXPECT_EQ(m[5].role, "assistant") << "a call after tool outputs starts a new assistant turn";
  EXPECT_EQ(m[5].content, "");
  ASSERT_EQ(m[5].tool_calls.size(), 1u);

  std::vector<backend::ChatMessage> conv = m;
  resolve_tool_names(conv);
  EXPECT_EQ(conv[3].tool_name, "f");
  EXPECT_EQ(conv[4].tool_name, "g");
}

TEST(ResponsesCodec, ToolsToolChoiceAndTextFormat) {
  auto r = ok(body(
      R"("tools":[{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object"},"strict":false},)"
      R"({"type":"function","name":"noargs"}],"tool_choice":{"type":"function","name":"get_weather"},)"
      R"("text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"},"strict":true}})"));
  ASSERT_EQ(r.chat.tools.size(), 2u);
  EXPECT_EQ(r.chat.tools[0].name, "get_weather");
  EXPECT_EQ(r.chat.tools[0].description, "d");
  EXPECT_EQ(json::parse(r.chat.tools[0].parameters), json::parse(R"({"type":"object"})"));
  EXPECT_EQ(r.chat.tools[1].parameters, "");
  EXPECT_EQ(r.chat.forced_tool, "get_weather");
  EXPECT_EQ(r.chat.tool_choice, backend::ToolChoice::kRequired);
  EXPECT_EQ(r.generation.constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(json::parse(r.generation.constraint.json_schema), json::parse(R"({"type":"object"})"));
  EXPECT_EQ(r.echo["tools"][0]["strict"], false);
  EXPECT_EQ(r.echo["tools"][1]["parameters"], nullptr);
  EXPECT_EQ(r.echo["tool_choice"]["name"], "get_weather");
  EXPECT_EQ(r.echo["text"]["format"]["name"], "x");

  EXPECT_EQ(ok(body(R"("tool_choice":"none")")).chat.tool_choice, backend::ToolChoice::kNone);
  EXPECT_EQ(ok(body(R"("tool_choice":"required")")).chat.tool_choice, backend::ToolChoice::kRequired);
  EXPECT_EQ(ok(body(R"("text":{"format":{"type":"json_object"}})")).generation.constraint.kind,
            Kind::kJsonObject);
  EXPECT_EQ(ok(body(R"("text":{"format":{"type":"text"},"verbosity":"low"})")).generation.constraint.kind,
            Kind::kNone);
}

TEST(ResponsesCodec, ErrorsNameTheField) {
  error("not json", "", "");
  error("[]", "", "JSON object");
  error(R"({"input":"hi"})", "model", "required");
  error(R"({"model":"m"})", "input", "required");
  error(R"({"model":"m","input":[]})", "input", "empty array");
  error(R"({"model":"m","input":5})", "input", "string");
  error(R"({"model":"m","input":["x"]})", "input[0]", "object");
  error(
      R"({"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]}]})",
      "input[0].content[1].type", "input_image");
  error(R"({"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]})",
        "input[0].content[0].type", "read text only");
  error(R"({"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]})",
        "input[0].content[0].type", "input_audio");
  error(R"({"model":"m","input":[{"role":"tool","content":"x"}]})", "input[0].role", "\"tool\"");
  error(R"({"model":"m","input":[{"role":"user"}]})", "input[0].content", "required");
  error(R"({"model":"m","input":[{"type":"web_search_call","id":"x"}]})", "input[0].type", "web_search_call");
  error(R"({"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]})", "input[0].call_id",
        "required");
  error(R"({"model":"m","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]})", "input[0].name",
        "required");
  error(R"({"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"[1]"}]})",
        "input[0].arguments", "JSON object");
  error(R"({"model":"m","input":[{"type":"function_call_output","output":"x"}]})", "input[0].call_id",
        "required");
  error(R"({"model":"m","input":[{"type":"function_call_output","call_id":"c"}]})", "input[0].output",
        "required");
  error(body(R"("instructions":5)"), "instructions", "string");
  error(body(R"("tools":{})"), "tools", "array");
  error(body(R"("tools":[{"type":"web_search"}])"), "tools[0].type", "function");
  error(body(R"("tools":[{"type":"function","function":{"name":"f"}}])"), "tools[0].name", "required");
  error(body(R"("tools":[{"type":"function","name":"f","parameters":"x"}])"), "tools[0].parameters",
        "schema");
  error(body(R"("tools":[{"type":"function","name":"f","strict":"yes"}])"), "tools[0].strict", "boolean");
  error(body(R"("tool_choice":"always")"), "tool_choice", "always");
  error(body(R"("tool_choice":{"type":"function"})"), "tool_choice", "name");
  error(body(R"("parallel_tool_calls":"yes")"), "parallel_tool_calls", "boolean");
  error(body(R"("text":{"format":{"type":"xml"}})"), "text.format.type", "xml");
  error(body(R"("text":{"format":{"type":"json_schema","name":"x"}})"), "text.format.schema", "schema");
  error(body(R"("text":"json")"), "text", "object");
  error(body(R"("max_output_tokens":0)"), "max_output_tokens", "1..");
  error(body(R"("max_output_tokens":1.5)"), "max_output_tokens", "integer");
  error(body(R"("temperature":3)"), "temperature", "0..2");
  error(body(R"("top_p":-1)"), "top_p", "0..1");
  error(body(R"("stream":1)"), "stream", "boolean");
  error(body(R"("store":"no")"), "store", "boolean");
  error(body(R"("previous_response_id":7)"), "previous_response_id", "string");
  error(body(R"("metadata":{"k":1})"), "metadata", "string");
  error(body(R"("metadata":[])"), "metadata", "object");
  error(body(R"("background":true)"), "background", "not supported");
  error(body(R"("conversation":"conv_1")"), "conversation", "previous_response_id");
  error(body(R"("reasoning":"high")"), "reasoning", "object");
}

TEST(ResponsesCodec, MapsChatFieldNames) {
  EXPECT_EQ(map_chat_field("tools[1].function.name"), "tools[1].name");
  EXPECT_EQ(map_chat_field("messages[3].tool_call_id"), "input");
  EXPECT_EQ(map_chat_field("tool_choice"), "tool_choice");
}

TEST(ResponsesCodec, IdsHaveTheirPrefix) {
  const std::string a = new_id("resp"), b = new_id("resp");
  EXPECT_EQ(a.rfind("resp_", 0), 0u);
  EXPECT_EQ(a.size(), 5u + 32u);
  EXPECT_NE(a, b);
}

ResponseHead head() {
  ResponseHead h;
  h.id = "resp_x";
  h.model = "m";
  h.created_at = 123;
  h.echo = ok(body(R"("metadata":{"k":"v"},"max_output_tokens":9)")).echo;
  return h;
}

TEST(ResponsesCodec, ResponseObjectForText) {
  backend::ChatOutput out;
  out.content = "Hello";
  json r = response_object(head(), out, FinishReason::kEndOfGeneration, {10, 2, 0});
  EXPECT_EQ(r["id"], "resp_x");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["created_at"], 123);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["incomplete_details"], nullptr);
  EXPECT_EQ(r["error"], nullptr);
  EXPECT_EQ(r["model"], "m");
  EXPECT_EQ(r["metadata"]["k"], "v");
  EXPECT_EQ(r["max_output_tokens"], 9);
  ASSERT_EQ(r["output"].size(), 1u);
  const json& msg = r["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["text"], "Hello");
  EXPECT_EQ(msg["content"][0]["annotations"], json::array());
  EXPECT_EQ(r["usage"]["input_tokens"], 10);
  EXPECT_EQ(r["usage"]["output_tokens"], 2);
  EXPECT_EQ(r["usage"]["total_tokens"], 12);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cache_write_tokens"], 0);  // required by the spec
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
  // Prompt tokens from the prompt cache are part of input_tokens and counted in its details.
  json cached = response_object(head(), out, FinishReason::kEndOfGeneration, {10, 2, 0, 8});
  EXPECT_EQ(cached["usage"]["input_tokens"], 10);
  EXPECT_EQ(cached["usage"]["input_tokens_details"]["cached_tokens"], 8);
}

TEST(ResponsesCodec, ResponseObjectWithReasoningCallsAndACut) {
  backend::ChatOutput out;
  out.reasoning_content = "hmm";
  out.tool_calls = {{"call_1", "f", "{\"a\":1}"}, {"call_2", "g", "{}"}};
  json r = response_object(head(), out, FinishReason::kStopString, {5, 9, 3});
  ASSERT_EQ(r["output"].size(), 3u) << "no message item when the answer is only calls";
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "hmm");
  EXPECT_EQ(r["output"][0]["summary"], json::array());
  EXPECT_EQ(r["output"][1]["type"], "function_call");
  EXPECT_EQ(r["output"][1]["call_id"], "call_1");
  EXPECT_EQ(r["output"][1]["name"], "f");
  EXPECT_EQ(r["output"][1]["arguments"], "{\"a\":1}");
  EXPECT_EQ(r["output"][1]["status"], "completed");
  EXPECT_EQ(r["output"][2]["call_id"], "call_2");
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 3);

  backend::ChatOutput cut;
  cut.content = "Hel";
  json c = response_object(head(), cut, FinishReason::kMaxTokens, {5, 9, 0});
  EXPECT_EQ(c["status"], "incomplete");
  EXPECT_EQ(c["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(c["output"][0]["status"], "incomplete");

  backend::ChatOutput empty;
  json e = response_object(head(), empty, FinishReason::kEndOfGeneration, {});
  ASSERT_EQ(e["output"].size(), 1u) << "an empty answer is an empty message";
  EXPECT_EQ(e["output"][0]["content"][0]["text"], "");

  auto m = assistant_message(out);
  EXPECT_EQ(m.role, "assistant");
  EXPECT_EQ(m.reasoning_content, "hmm");
  EXPECT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(json::parse(deleted_body("resp_x")),
            json::parse(R"({"id":"resp_x","object":"response","deleted":true})"));
}

struct Event {
  std::string type;
  json data;
};

// Splits "event: T\ndata: {...}\n\n" frames; each data's type must be its event name.
std::vector<Event> parse_events(const std::string& sse) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "an unterminated event";
    if (end == std::string::npos) break;
    const std::string frame = sse.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    const size_t nl = frame.find('\n');
    EXPECT_NE(nl, std::string::npos);
    Event e{frame.substr(7, nl - 7), json()};
    EXPECT_EQ(frame.compare(nl + 1, 6, "data: "), 0) << frame;
    e.data = json::parse(frame.substr(nl + 7));
    EXPECT_EQ(e.data["type"], e.type);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> types(const std::vector<Event>& events) {
  std::vector<std::string> t;
  for (const auto& e : events) t.push_back(e.type);
  return t;
}

void expect_sequence_numbers(const std::vector<Event>& events) {
  for (size_t i = 0; i < events.size(); ++i)
    EXPECT_EQ(events[i].data["sequence_number"], i) << events[i].type;
}

ChatOutputDelta text(std::string s) {
  ChatOutputDelta d;
  d.content = std::move(s);
  return d;
}

ChatOutputDelta call(size_t index, std::string id, std::string name, std::string args) {
  ChatOutputDelta d;
  d.tool_index = index;
  d.tool_call = {std::move(id), std::move(name), std::move(args)};
  return d;
}

TEST(ResponsesStream, TextStream) {
  StreamEncoder enc(head());
  std::string sse = enc.begin();
  sse += enc.add({text("Hel")});
  sse += enc.add({});
  sse += enc.add({text("lo")});
  sse += enc.finish(FinishReason::kEndOfGeneration, {4, 2, 0});
  auto events = parse_events(sse);
  EXPECT_EQ(types(events),
            (std::vector<std::string>{"response.created", "response.in_progress",
                                      "response.output_item.added", "response.content_part.added",
                                      "response.output_text.delta", "response.output_text.delta",
                                      "response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  expect_sequence_numbers(events);
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], json::array());
  const json& added = events[2].data;
  EXPECT_EQ(added["output_index"], 0);
  EXPECT_EQ(added["item"]["type"], "message");
  EXPECT_EQ(added["item"]["status"], "in_progress");
  EXPECT_EQ(added["item"]["content"], json::array());
  const std::string id = added["item"]["id"];
  for (size_t i = 3; i <= 7; ++i) {
    EXPECT_EQ(events[i].data["item_id"], id) << events[i].type;
    EXPECT_EQ(events[i].data["output_index"], 0);
    EXPECT_EQ(events[i].data["content_index"], 0);
  }
  EXPECT_EQ(events[4].data["delta"], "Hel");
  EXPECT_EQ(events[5].data["delta"], "lo");
  EXPECT_EQ(events[6].data["text"], "Hello");
  EXPECT_EQ(events[7].data["part"]["text"], "Hello");
  EXPECT_EQ(events[8].data["item"]["status"], "completed");
  EXPECT_EQ(events[8].data["item"]["content"][0]["text"], "Hello");
  const json& final = events[9].data["response"];
  EXPECT_EQ(final["status"], "completed");
  EXPECT_EQ(final["output"].size(), 1u);
  EXPECT_EQ(final["output"][0]["id"], id);
  EXPECT_EQ(final["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(final["usage"]["total_tokens"], 6);
  EXPECT_EQ(enc.response(), final);
  EXPECT_EQ(enc.output().content, "Hello");
}

TEST(ResponsesStream, ReasoningTextAndFunctionCalls) {
  StreamEncoder enc(head());
  std::string sse = enc.begin();
  ChatOutputDelta think;
  think.reasoning_content = "hmm";
  sse += enc.add({think, text("Looking.")});
  sse += enc.add({call(0, "call_a", "get_weather", "")});
  sse += enc.add({call(0, "", "", "{\"city\":"), call(0, "", "", "\"Paris\"}")});
  sse += enc.add({call(1, "call_b", "noargs", "{}")});
  sse += enc.finish(FinishReason::kEndOfGeneration, {4, 20, 1});
  auto events = parse_events(sse);
  EXPECT_EQ(types(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress",
                // the reasoning item
                "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
                "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                // the message
                "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                "response.output_text.done", "response.content_part.done", "response.output_item.done",
                // call 0
                "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.delta", "response.function_call_arguments.done",
                "response.output_item.done",
                // call 1
                "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  expect_sequence_numbers(events);
  EXPECT_EQ(events[2].data["item"]["type"], "reasoning");
  EXPECT_EQ(events[3].data["part"]["type"], "reasoning_text");
  EXPECT_EQ(events[4].data["delta"], "hmm");
  EXPECT_EQ(events[8].data["output_index"], 1);
  const json& fc = events[14].data;
  EXPECT_EQ(fc["output_index"], 2);
  EXPECT_EQ(fc["item"]["type"], "function_call");
  EXPECT_EQ(fc["item"]["call_id"], "call_a");
  EXPECT_EQ(fc["item"]["name"], "get_weather");
  EXPECT_EQ(fc["item"]["arguments"], "");
  EXPECT_EQ(fc["item"]["status"], "in_progress");
  EXPECT_EQ(events[15].data["item_id"], fc["item"]["id"]);
  EXPECT_EQ(events[15].data["delta"], "{\"city\":");
  EXPECT_EQ(events[17].data["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(events[18].data["item"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(events[18].data["item"]["status"], "completed");
  EXPECT_EQ(events[19].data["output_index"], 3);
  const json& final = events.back().data["response"];
  ASSERT_EQ(final["output"].size(), 4u);
  EXPECT_EQ(final["output"][0]["content"][0]["text"], "hmm");
  EXPECT_EQ(final["output"][1]["content"][0]["text"], "Looking.");
  EXPECT_EQ(final["output"][2]["call_id"], "call_a");
  EXPECT_EQ(final["output"][3]["name"], "noargs");
  EXPECT_EQ(enc.output().reasoning_content, "hmm");
  EXPECT_EQ(enc.output().content, "Looking.");
  ASSERT_EQ(enc.output().tool_calls.size(), 2u);
  EXPECT_EQ(enc.output().tool_calls[0].arguments, "{\"city\":\"Paris\"}");
}

TEST(ResponsesStream, CutAtMaxTokensIsIncomplete) {
  StreamEncoder enc(head());
  std::string sse = enc.begin();
  sse += enc.add({text("Hel")});
  sse += enc.finish(FinishReason::kMaxTokens, {4, 1, 0});
  auto events = parse_events(sse);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, "response.incomplete");
  EXPECT_EQ(events.back().data["response"]["status"], "incomplete");
  EXPECT_EQ(events.back().data["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(events.back().data["response"]["output"][0]["status"], "incomplete");
}

TEST(ResponsesStream, NothingGeneratedIsAnEmptyMessage) {
  StreamEncoder enc(head());
  std::string sse = enc.begin();
  sse += enc.finish(FinishReason::kEndOfGeneration, {4, 0, 0});
  auto events = parse_events(sse);
  EXPECT_EQ(types(events),
            (std::vector<std::string>{"response.created", "response.in_progress",
                                      "response.output_item.added", "response.content_part.added",
                                      "response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  expect_sequence_numbers(events);
}

TEST(ResponsesStream, FailureClosesTheItemThenFailedAndError) {
  StreamEncoder enc(head());
  std::string sse = enc.begin();
  sse += enc.add({text("Hel")});
  ApiError e;
  e.http_status = 503;
  e.type = "server_error";
  e.message = "the generation was cancelled";
  sse += enc.fail(e);
  auto events = parse_events(sse);
  ASSERT_GE(events.size(), 4u);
  expect_sequence_numbers(events);
  EXPECT_EQ(events[events.size() - 3].type, "response.output_item.done");
  EXPECT_EQ(events[events.size() - 3].data["item"]["status"], "incomplete");
  const Event& failed = events[events.size() - 2];
  EXPECT_EQ(failed.type, "response.failed");
  EXPECT_EQ(failed.data["response"]["status"], "failed");
  EXPECT_EQ(failed.data["response"]["error"]["code"], "server_error");
  EXPECT_EQ(failed.data["response"]["error"]["message"], "the generation was cancelled");
  const Event& err = events.back();
  EXPECT_EQ(err.type, "error");
  EXPECT_EQ(err.data["code"], "server_error");
  EXPECT_EQ(err.data["message"], "the generation was cancelled");
  EXPECT_EQ(err.data["param"], nullptr);
}

}  // namespace
}  // namespace gantry::protocol::responses

namespace gantry::protocol::responses {
namespace {

TEST(ResponsesCodec, InputItemsListTheRequestsMessages) {
  std::vector<backend::ChatMessage> input;
  input.emplace_back("user", "Weather in Paris?");
  backend::ChatMessage call("assistant", "");
  call.tool_calls.push_back({"call_1", "get_weather", R"({"city":"Paris"})"});
  input.push_back(call);
  backend::ChatMessage out("tool", "Sunny");
  out.tool_call_id = "call_1";
  input.push_back(out);
  const json items = input_items(input);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0]["type"], "message");
  EXPECT_EQ(items[0]["role"], "user");
  EXPECT_EQ(items[0]["content"], json::array({{{"type", "input_text"}, {"text", "Weather in Paris?"}}}));
  EXPECT_EQ(items[1]["type"], "function_call");  // an assistant turn of calls only: no empty message
  EXPECT_EQ(items[1]["call_id"], "call_1");
  EXPECT_EQ(items[2]["type"], "function_call_output");
  EXPECT_EQ(items[2]["output"], "Sunny");
  for (const auto& item : items) EXPECT_EQ(item["status"], "completed");
  const json list = json::parse(input_items_list(items.dump()));
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["first_id"], items[0]["id"]);
  EXPECT_EQ(list["last_id"], items[2]["id"]);
  EXPECT_EQ(list["has_more"], false);
  EXPECT_EQ(json::parse(input_tokens_body(7)),
            json({{"object", "response.input_tokens"}, {"input_tokens", 7}}));
}

}  // namespace
}  // namespace gantry::protocol::responses
