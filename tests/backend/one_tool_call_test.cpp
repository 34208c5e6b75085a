// backend::at_most_one_tool_call: parallel_tool_calls false keeps the first call of an answer that
// holds several, streamed or whole.
#include <gtest/gtest.h>

#include "gantry/backend/chat_generation.h"

namespace gantry::backend {
namespace {

// An answer of text then two tool calls, each add() a step of it.
class TwoCallsParser final : public ChatOutputParser {
 public:
  std::vector<ChatOutputDelta> add(std::string_view, bool) override {
    std::vector<ChatOutputDelta> out;
    ChatOutputDelta text;
    text.content = "Let me check.";
    out.push_back(text);
    for (size_t i = 0; i < 2; ++i) {
      ChatOutputDelta d;
      d.tool_index = i;
      d.tool_call = {"call_" + std::to_string(i), "get_weather", "{\"city\":\"Paris\"}"};
      out.push_back(d);
      output_.tool_calls.push_back(d.tool_call);
    }
    output_.content = "Let me check.";
    return out;
  }
  const ChatOutput& output() const override { return output_; }

 private:
  ChatOutput output_;
};

TEST(AtMostOneToolCall, DropsTheDeltasOfLaterCalls) {
  auto parser = at_most_one_tool_call(std::make_unique<TwoCallsParser>());
  const auto deltas = parser->add("x", true);
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(deltas[0].content, "Let me check.");
  EXPECT_EQ(deltas[1].tool_index, 0u);
  EXPECT_EQ(deltas[1].tool_call.id, "call_0");
}

TEST(AtMostOneToolCall, TheOutputHoldsTheFirstCallAndTheText) {
  auto parser = at_most_one_tool_call(std::make_unique<TwoCallsParser>());
  parser->add("x", true);
  ASSERT_EQ(parser->output().tool_calls.size(), 1u);
  EXPECT_EQ(parser->output().tool_calls[0].id, "call_0");
  EXPECT_EQ(parser->output().content, "Let me check.");
}

}  // namespace
}  // namespace gantry::backend
