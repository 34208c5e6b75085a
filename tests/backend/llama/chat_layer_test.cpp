// The text facet of a llama.cpp model: llama.cpp's chat layer renders tools in each family's format (or
// Gantry's generic JSON format for templates without one), constrains calls by grammar, and parses answers
// back, whole and piece by piece. On tiny-llama (ChatML), tiny-qwen25-tools (Qwen2.5: Hermes <tool_call>)
// and tiny-llama31-tools (Llama 3.1), all generated at set-up.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <variant>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/chat_generation.h"
#include "gantry/backend/llama/llama_backend.h"
#include "gantry/core/file_io.h"

namespace gantry::llama {
namespace {

using backend::ChatRequest;
using backend::ToolChoice;
using Kind = backend::OutputConstraint::Kind;
using nlohmann::json;

std::string model_path(const std::string& stem) {
  return std::string(GANTRY_DEPS_DIR) + "/models/" + stem + ".gguf";
}

std::unique_ptr<backend::Model> load(const std::string& stem,
                                     std::map<std::string, std::string> options = {}) {
  LlamaBackend backend;
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  options.emplace("n_ctx", "2048");
  auto llama = model::parse_llama_options(options);
  EXPECT_TRUE(llama.ok()) << llama.status().to_string();
  if (!llama.ok()) return nullptr;
  p.llama = *llama;
  auto m = backend.load_file(model_path(stem), p);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  return std::unique_ptr<backend::Model>(std::move(*m));
}

ChatRequest weather_request(ToolChoice choice) {
  ChatRequest r;
  r.messages = {{"user", "What is the weather in Paris?"}};
  r.tools = {
      {"get_weather", "The weather of a city",
       R"({"type":"object","properties":{"city":{"type":"string","enum":["Paris","London"]}},"required":["city"]})"}};
  r.tool_choice = choice;
  return r;
}

// Feeds `text` to a fresh parser one byte at a time (the worst split a stream can give), then ends it.
struct Streamed {
  backend::ChatOutput output;
  std::vector<backend::ChatOutputDelta> deltas;
};
Streamed stream_through(const backend::TextModel& t, const backend::ChatPrompt& prompt,
                        const std::string& text) {
  auto parser = t.chat_parser(prompt);
  EXPECT_TRUE(parser.ok()) << parser.status().to_string();
  Streamed s;
  for (char c : text) {
    for (auto& d : (*parser)->add(std::string_view(&c, 1), false)) s.deltas.push_back(std::move(d));
  }
  for (auto& d : (*parser)->add("", true)) s.deltas.push_back(std::move(d));
  s.output = (*parser)->output();
  return s;
}

TEST(ChatLayer, PlainChatsRenderWithTheModelsOwnTemplate) {
  auto m = load("tiny-llama");
  ASSERT_TRUE(m);
  const backend::TextModel* t = m->text();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->text_info().chat.source, "gguf");
  EXPECT_EQ(t->text_info().context_length, 2048);
  EXPECT_TRUE(t->text_info().chat.tools);
  std::vector<backend::ChatMessage> msgs = {{"system", "Be brief."}, {"user", "Hi there"}};
  auto text = m->format_chat(msgs, true);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_EQ(*text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatLayer, ATemplateWithoutToolsGetsTheGenericJsonFormat) {
  auto m = load("tiny-llama");
  ASSERT_TRUE(m);
  const backend::TextModel& t = *m->text();
  auto prompt = t.apply_chat(weather_request(ToolChoice::kRequired));
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_NE(prompt->prompt.find("get_weather"), std::string::npos) << "the tools are described in the prompt";
  EXPECT_NE(prompt->format.find("generic"), std::string::npos) << prompt->format;
  EXPECT_EQ(prompt->constraint.kind, Kind::kGrammar);
  EXPECT_FALSE(prompt->constraint.lazy) << "the whole answer is the JSON object";

  Streamed call = stream_through(
      t, *prompt, R"({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})");
  ASSERT_EQ(call.output.tool_calls.size(), 1u);
  EXPECT_EQ(call.output.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(call.output.tool_calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(call.output.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_TRUE(call.output.content.empty());

  auto auto_prompt = t.apply_chat(weather_request(ToolChoice::kAuto));
  ASSERT_TRUE(auto_prompt.ok());
  Streamed text = stream_through(t, *auto_prompt, R"({"response": "It is sunny."})");
  EXPECT_EQ(text.output.content, "It is sunny.");
  EXPECT_TRUE(text.output.tool_calls.empty());
  Streamed other = stream_through(t, *auto_prompt, "not the format");
  EXPECT_EQ(other.output.content, "not the format") << "what the model wrote is kept";
}

TEST(ChatLayer, QwenCallsAreParsedInTheirNativeFormatWhileStreaming) {
  auto m = load("tiny-qwen25-tools");
  ASSERT_TRUE(m);
  const backend::TextModel& t = *m->text();
  EXPECT_EQ(t.text_info().chat.source, "gguf");
  auto prompt = t.apply_chat(weather_request(ToolChoice::kAuto));
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_NE(prompt->prompt.find("<tools>"), std::string::npos)
      << "Qwen's template describes the tools itself";
  ASSERT_EQ(prompt->constraint.kind, Kind::kGrammar);
  EXPECT_TRUE(prompt->constraint.lazy) << "auto: the model may answer in text; the grammar waits for a call";
  EXPECT_FALSE(prompt->constraint.trigger_patterns.empty() && prompt->constraint.trigger_tokens.empty());

  const std::string answer =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  Streamed s = stream_through(t, *prompt, answer);
  ASSERT_EQ(s.output.tool_calls.size(), 1u);
  EXPECT_EQ(s.output.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(s.output.tool_calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_TRUE(s.output.content.empty()) << s.output.content;
  // The deltas: the call announced once with its id and whole name, then arguments that add up.
  std::string args;
  int heads = 0;
  for (const auto& d : s.deltas) {
    if (d.tool_index == static_cast<size_t>(-1)) continue;
    EXPECT_EQ(d.tool_index, 0u);
    if (!d.tool_call.name.empty()) {
      ++heads;
      EXPECT_EQ(d.tool_call.name, "get_weather");
      EXPECT_EQ(d.tool_call.id, s.output.tool_calls[0].id);
    }
    args += d.tool_call.arguments;
  }
  EXPECT_EQ(heads, 1);
  EXPECT_EQ(args, s.output.tool_calls[0].arguments);

  Streamed text = stream_through(t, *prompt, "It is sunny in Paris.");
  EXPECT_EQ(text.output.content, "It is sunny in Paris.");
  EXPECT_TRUE(text.output.tool_calls.empty());
}

TEST(ChatLayer, RequiredCallsStartAtOnceAndCutOffCallsAreDropped) {
  auto m = load("tiny-qwen25-tools");
  ASSERT_TRUE(m);
  const backend::TextModel& t = *m->text();
  auto prompt = t.apply_chat(weather_request(ToolChoice::kRequired));
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  ASSERT_EQ(prompt->constraint.kind, Kind::kGrammar);
  EXPECT_FALSE(prompt->constraint.lazy);
  const std::string& g = prompt->constraint.grammar;
  const size_t root = g.find("root ::= ");
  ASSERT_NE(root, std::string::npos);
  const std::string root_rule = g.substr(root, g.find('\n', root) - root);
  EXPECT_EQ(root_rule.find("until-"), std::string::npos) << "no free text before the call: " << root_rule;

  Streamed cut = stream_through(t, *prompt, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci");
  EXPECT_TRUE(cut.output.tool_calls.empty()) << "a call cut off by max_tokens is not a call";
}

TEST(ChatLayer, ANamedToolIsTheOnlyOneOfferedAndGenerationProducesIt) {
  for (const char* stem : {"tiny-llama", "tiny-qwen25-tools", "tiny-llama31-tools"}) {
    SCOPED_TRACE(stem);
    auto m = load(stem);
    ASSERT_TRUE(m);
    const backend::TextModel& t = *m->text();
    ChatRequest r = weather_request(ToolChoice::kAuto);
    r.tools.push_back({"get_time", "The time of a city", R"({"type":"object","properties":{}})"});
    r.forced_tool = "get_weather";
    r.parallel_tool_calls = false;
    auto prompt = t.apply_chat(r);
    ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
    backend::GenerationRequest g;
    g.prompt = prompt->prompt;
    g.constraint = prompt->constraint;
    g.stop = prompt->stop;
    g.render_tokens = prompt->keep_tokens;
    g.render_special = false;
    g.max_tokens = 256;
    g.sampling.temperature = 0;
    auto result = m->generate(g);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    auto parser = t.chat_parser(*prompt);
    ASSERT_TRUE(parser.ok());
    (*parser)->add(result->text, true);
    const auto& out = (*parser)->output();
    ASSERT_EQ(out.tool_calls.size(), 1u) << "answer: " << result->text;
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    const json args = json::parse(out.tool_calls[0].arguments);
    EXPECT_TRUE(args["city"] == "Paris" || args["city"] == "London") << args.dump();
  }
}

TEST(ChatLayer, BadRequestsNameThePart) {
  auto m = load("tiny-qwen25-tools");
  ASSERT_TRUE(m);
  const backend::TextModel& t = *m->text();
  ChatRequest r = weather_request(ToolChoice::kAuto);
  r.tools[0].parameters = R"({"type":"object","properties":{"s":{"type":"string","pattern":"^a+$"}}})";
  auto bad_schema = t.apply_chat(r);
  ASSERT_FALSE(bad_schema.ok());
  EXPECT_EQ(bad_schema.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_schema.status().message().rfind("tools[0].function.parameters: ", 0), 0u)
      << bad_schema.status().message();
  // Through the one chat entry: the template's refusal with its field split off, and the request's own
  // checks (done there once, not again in the template).
  auto schema = backend::prepare_chat(*m, "m", r, {});
  ASSERT_TRUE(std::holds_alternative<backend::ChatRefusal>(schema));
  EXPECT_EQ(std::get<backend::ChatRefusal>(schema).field, "tools[0].function.parameters");
  ChatRequest undeclared = weather_request(ToolChoice::kAuto);
  undeclared.forced_tool = "get_time";
  auto refused = backend::prepare_chat(*m, "m", undeclared, {});
  ASSERT_TRUE(std::holds_alternative<backend::ChatRefusal>(refused));
  EXPECT_EQ(std::get<backend::ChatRefusal>(refused).field, "tool_choice");
  EXPECT_EQ(std::get<backend::ChatRefusal>(refused).status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::get<backend::ChatRefusal>(refused).status.message().find("get_time"), std::string::npos);
  auto fine = backend::prepare_chat(*m, "m", weather_request(ToolChoice::kRequired), {}, 2);
  ASSERT_TRUE(std::holds_alternative<backend::ChatGeneration>(fine));
  const auto& g = std::get<backend::ChatGeneration>(fine);
  EXPECT_EQ(g.parsers.size(), 2u);
  EXPECT_FALSE(g.request.prompt.empty());
  EXPECT_EQ(g.request.constraint.kind, backend::OutputConstraint::Kind::kGrammar)
      << "a required call is constrained";
}

TEST(ChatLayer, AChatTemplateFileReplacesTheGgufs) {
  const std::string qwen =
      std::string(GANTRY_DEPS_DIR) + "/llama/src/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja";
  auto m = load("tiny-llama", {{"chat_template_file", qwen}});
  ASSERT_TRUE(m);
  const auto& info = m->text()->text_info().chat;
  EXPECT_EQ(info.source, "file " + qwen);
  EXPECT_EQ(info.format.find("generic"), std::string::npos) << "Qwen's template has its own tool format";
  auto text = m->format_chat(std::vector<backend::ChatMessage>{{"user", "hi"}}, true);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("You are Qwen"), std::string::npos) << *text;

  const std::string broken = ::testing::TempDir() + "/broken.jinja";
  ASSERT_TRUE(write_file(broken, "{% for m in messages %}{{ m.content ").ok());
  LlamaBackend backend;
  backend::Placement p;
  p.provider = "cpu";
  p.llama.chat_template_file = broken;
  auto bad = backend.load_file(model_path("tiny-llama"), p);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(broken), std::string::npos) << bad.status().message();

  auto info_only = inspect_chat_template(model_path("tiny-qwen25-tools"));
  ASSERT_TRUE(info_only.ok()) << info_only.status().to_string();
  EXPECT_TRUE(info_only->tools);
  EXPECT_TRUE(info_only->parallel_tool_calls);
}

}  // namespace
}  // namespace gantry::llama
