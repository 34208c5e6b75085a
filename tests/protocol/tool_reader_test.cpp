#include "gantry/protocol/tool_reader.h"

#include <gtest/gtest.h>

namespace gantry::protocol {
namespace {
using nlohmann::json;

JsonFieldError refused(const json& body, const ToolLayout& layout) {
  std::vector<backend::ToolDefinition> tools;
  auto e = read_tools(body, layout, tools);
  EXPECT_TRUE(e.has_value()) << body.dump();
  EXPECT_TRUE(tools.empty()) << "a refused list adds no tool";
  return e.value_or(JsonFieldError{});
}

TEST(ToolReader, EveryLayoutReadsTheSameThreeFacts) {
  const json schema = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
  const std::pair<const ToolLayout*, json> cases[] = {
      {&kOpenAiChatTools,
       {{"type", "function"}, {"function", {{"name", "f"}, {"description", "d"}, {"parameters", schema}}}}},
      {&kOllamaTools, {{"function", {{"name", "f"}, {"description", "d"}, {"parameters", schema}}}}},
      {&kResponsesTools, {{"type", "function"}, {"name", "f"}, {"description", "d"}, {"parameters", schema}}},
      {&kAnthropicTools, {{"name", "f"}, {"description", "d"}, {"input_schema", schema}}},
  };
  for (const auto& [layout, tool] : cases) {
    std::vector<backend::ToolDefinition> tools;
    ASSERT_FALSE(read_tools(json{{"tools", {tool}}}, *layout, tools)) << tool.dump();
    ASSERT_EQ(tools.size(), 1u);
    EXPECT_EQ(tools[0].name, "f");
    EXPECT_EQ(tools[0].description, "d");
    EXPECT_EQ(json::parse(tools[0].parameters), schema);
  }
}

TEST(ToolReader, TheSameMistakeIsNamedTheSameWayInEveryLayout) {
  // A name that is not a string, at each layout's own place.
  EXPECT_EQ(refused(json::parse(R"({"tools":[{"type":"function","function":{"name":3}}]})"), kOpenAiChatTools)
                .field,
            "tools[0].function.name");
  EXPECT_EQ(refused(json::parse(R"({"tools":[{"type":"function","name":""}]})"), kResponsesTools).field,
            "tools[0].name");
  const auto anthropic = refused(json::parse(R"({"tools":[{"input_schema":{}}]})"), kAnthropicTools);
  EXPECT_EQ(anthropic.field, "tools[0].name");
  EXPECT_NE(anthropic.problem.find("non-empty string"), std::string::npos) << anthropic.problem;
  // Another tool type: refused by name, with what was sent.
  const auto type = refused(json::parse(R"({"tools":[{"type":"web_search","name":"w"}]})"), kAnthropicTools);
  EXPECT_EQ(type.field, "tools[0].type");
  EXPECT_NE(type.problem.find("\"web_search\""), std::string::npos) << type.problem;
  EXPECT_NE(type.problem.find("not supported"), std::string::npos) << type.problem;
  // "type" is required in OpenAI's layouts, not in Ollama's.
  EXPECT_EQ(refused(json::parse(R"({"tools":[{"function":{"name":"f"}}]})"), kOpenAiChatTools).field,
            "tools[0].type");
  // A schema that is not an object; Anthropic's is required.
  EXPECT_EQ(
      refused(json::parse(R"({"tools":[{"function":{"name":"f","parameters":"x"}}]})"), kOllamaTools).field,
      "tools[0].function.parameters");
  EXPECT_EQ(refused(json::parse(R"({"tools":[{"name":"f"}]})"), kAnthropicTools).field,
            "tools[0].input_schema");
  // The list itself.
  EXPECT_EQ(refused(json::parse(R"({"tools":{}})"), kResponsesTools).field, "tools");
  // The second tool's mistake leaves the first unread as well.
  EXPECT_EQ(
      refused(json::parse(R"({"tools":[{"name":"a","input_schema":{}},{"name":"b","input_schema":1}]})"),
              kAnthropicTools)
          .field,
      "tools[1].input_schema");
}

TEST(ToolReader, ToolChoiceInBothOpenAiForms) {
  backend::ChatRequest chat;
  ASSERT_FALSE(read_tool_choice(json::parse(R"({"tool_choice":{"type":"function","function":{"name":"f"}}})"),
                                kOpenAiChatTools, chat));
  EXPECT_EQ(chat.forced_tool, "f");
  EXPECT_EQ(chat.tool_choice, backend::ToolChoice::kRequired);

  backend::ChatRequest responses;
  ASSERT_FALSE(read_tool_choice(json::parse(R"({"tool_choice":{"type":"function","name":"g"}})"),
                                kResponsesTools, responses));
  EXPECT_EQ(responses.forced_tool, "g");

  backend::ChatRequest none;
  ASSERT_FALSE(read_tool_choice(json::parse(R"({"tool_choice":"none"})"), kOpenAiChatTools, none));
  EXPECT_EQ(none.tool_choice, backend::ToolChoice::kNone);
  EXPECT_TRUE(none.forced_tool.empty());

  // Each form is refused in the other's place, and an unknown word names what was sent.
  backend::ChatRequest r;
  EXPECT_TRUE(read_tool_choice(json::parse(R"({"tool_choice":{"type":"function","name":"g"}})"),
                               kOpenAiChatTools, r));
  auto e = read_tool_choice(json::parse(R"({"tool_choice":"sometimes"})"), kResponsesTools, r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "tool_choice");
  EXPECT_NE(e->problem.find("\"sometimes\""), std::string::npos) << e->problem;
}

}  // namespace
}  // namespace gantry::protocol
