// BENCH chat-template-overhead: what Gantry's chat layer costs over llama.cpp's own, for one request of an
// agent: format a 20-message chat with 5 tools (tool calls and results in the history) and parse a tool-call
// answer. Gantry: TextModel::apply_chat + chat_parser (request checks, schema checks, type translation,
// delta tracking included). Reference: common_chat_templates_apply + common_chat_parse called directly on the
// same template, inputs and answer. Same model (tiny-qwen25-tools: Qwen2.5's template, Hermes calls), the two
// sides alternating request by request, median of 9 rounds. ratio = Gantry / llama.cpp (goal <= 1.05).
#include <chat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gantry/backend/llama/llama_backend.h"
#include "gantry/backend/llama/weights.h"

namespace {

using namespace gantry;
using Clock = std::chrono::steady_clock;

constexpr int kRounds = 9;
constexpr int kPerRound = 40;

backend::ChatRequest agent_chat() {
  backend::ChatRequest r;
  r.messages.emplace_back("system", "You are a helpful assistant with access to tools. Answer briefly.");
  const char* cities[] = {"Paris", "London", "Berlin", "Madrid", "Rome", "Vienna"};
  int call = 0;
  while (r.messages.size() < 19) {
    const std::string city = cities[call % 6];
    r.messages.emplace_back("user",
                            "What is the weather in " + city + " today, and should I take an umbrella?");
    backend::ChatMessage a("assistant", "");
    const std::string id = "call_" + std::to_string(call++);
    a.tool_calls.push_back({id, "get_weather", R"({"city":")" + city + R"("})"});
    r.messages.push_back(a);
    backend::ChatMessage t("tool", R"({"temperature_c": 14, "sky": "overcast", "rain_probability": 0.7})");
    t.tool_call_id = id;
    r.messages.push_back(t);
  }
  r.messages.emplace_back("user", "And in Lisbon?");
  const char* names[] = {"get_weather", "get_time", "search_web", "send_email", "create_event"};
  for (const char* n : names) {
    r.tools.push_back({n, std::string("The tool ") + n + " (for the benchmark)",
                       R"({"type":"object","properties":{"city":{"type":"string"},"query":{"type":"string"},)"
                       R"("count":{"type":"integer"},"urgent":{"type":"boolean"}},"required":["city"]})"});
  }
  return r;
}

const std::string kAnswer =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lisbon\"}}\n</tool_call>";

common_chat_templates_inputs reference_inputs(const backend::ChatRequest& r) {
  common_chat_templates_inputs in;
  for (const auto& m : r.messages) {
    common_chat_msg c;
    c.role = m.role;
    c.content = m.content;
    c.tool_call_id = m.tool_call_id;
    for (const auto& t : m.tool_calls) c.tool_calls.push_back({t.name, t.arguments, t.id});
    in.messages.push_back(std::move(c));
  }
  for (const auto& t : r.tools) in.tools.push_back({t.name, t.description, t.parameters});
  in.parallel_tool_calls = true;
  in.reasoning_format = COMMON_REASONING_FORMAT_AUTO;
  return in;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const std::string path = std::string(GANTRY_DEPS_DIR) + "/models/tiny-qwen25-tools.gguf";
  llama::LlamaBackend backend;
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  auto model = backend.load_file(path, p);
  if (!model.ok()) {
    std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), model.status().to_string().c_str());
    return 1;
  }
  const backend::TextModel& text = *(*model)->text();
  const backend::ChatRequest request = agent_chat();
  auto templates = common_chat_templates_init((*model)->weights().raw(), "");

  // Both sides must agree before they are timed.
  size_t calls_gantry = 0, calls_reference = 0, prompt_gantry = 0, prompt_reference = 0;
  auto gantry_once = [&] {
    auto prompt = text.apply_chat(request);
    if (!prompt.ok()) {
      std::fprintf(stderr, "apply_chat: %s\n", prompt.status().to_string().c_str());
      std::exit(1);
    }
    auto parser = text.chat_parser(*prompt);
    (*parser)->add(kAnswer, true);
    calls_gantry = (*parser)->output().tool_calls.size();
    prompt_gantry = prompt->prompt.size();
  };
  auto reference_once = [&] {
    common_chat_params out = common_chat_templates_apply(templates.get(), reference_inputs(request));
    common_chat_parser_params params(out);
    params.reasoning_format = COMMON_REASONING_FORMAT_AUTO;
    if (!out.parser.empty()) params.parser.load(out.parser);
    common_chat_msg msg = common_chat_parse(kAnswer, false, params);
    calls_reference = msg.tool_calls.size();
    prompt_reference = out.prompt.size();
  };
  gantry_once();
  reference_once();
  if (calls_gantry != 1 || calls_reference != 1 || prompt_gantry != prompt_reference) {
    std::fprintf(stderr, "the two sides disagree: calls %zu vs %zu, prompt %zu vs %zu bytes\n", calls_gantry,
                 calls_reference, prompt_gantry, prompt_reference);
    return 1;
  }

  // Interleaved request by request (the order alternating), so a busy machine slows both sides alike.
  std::vector<double> g_ms, r_ms;
  for (int round = 0; round < kRounds; ++round) {
    double g_sum = 0, r_sum = 0;
    for (int i = 0; i < kPerRound; ++i) {
      auto time = [](auto&& fn) {
        const auto t0 = Clock::now();
        fn();
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      };
      if (i % 2 == 0) {
        g_sum += time(gantry_once);
        r_sum += time(reference_once);
      } else {
        r_sum += time(reference_once);
        g_sum += time(gantry_once);
      }
    }
    g_ms.push_back(g_sum / kPerRound);
    r_ms.push_back(r_sum / kPerRound);
  }
  const double g = median(g_ms), r = median(r_ms);
  std::printf(
      "chat of %zu messages, %zu tools, prompt %zu bytes: Gantry %.3f ms, llama.cpp %.3f ms per request\n",
      request.messages.size(), request.tools.size(), prompt_gantry, g, r);
  std::printf("BENCH chat-template-overhead ratio=%.3f\n", g / r);
  return 0;
}
