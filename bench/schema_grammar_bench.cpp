// JSON schema -> grammar at the size limits (json_grammar.h), on the tiny model: how long the largest
// accepted schemas take to compile (our checks and llama.cpp's json_schema_to_grammar, then llama.cpp's
// grammar init; all run on the request's thread, in BatchEngine::submit), and what the widest accepted
// one costs the OTHER sequences of
// the engine, whose decode steps it shares (llama.cpp applies a sequence's grammar to the whole vocabulary
// at each of its tokens, on the decoding thread). Prints the times, and
//   BENCH schema-grammar-neighbour ratio=  a free greedy sequence's ms/token next to a sequence constrained
//                                          by the widest accepted schema, over the same next to a plain
//                                          json_object constraint (median of rounds; goal <= 1: no schema
//                                          costs the others more than "any JSON object" already does)
// Usage: schema_grammar_bench [N]  (N optional properties in the wide schema; default the limit)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "gantry/backend/llama/batch_engine.h"
#include "gantry/backend/llama/json_grammar.h"
#include "gantry/backend/llama/weights.h"
#include "llama.h"

namespace {

using Clock = std::chrono::steady_clock;
using gantry::backend::GenerationRequest;
using gantry::backend::OutputConstraint;
namespace gl = gantry::llama;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// An object of `n` properties (optional unless `required`), each a boolean.
std::string wide_object(size_t n, bool required) {
  nlohmann::ordered_json s = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
  nlohmann::ordered_json req = nlohmann::ordered_json::array();
  for (size_t i = 0; i < n; ++i) {
    const std::string name = "property_" + std::to_string(i);
    s["properties"][name] = {{"type", "boolean"}};
    req.push_back(name);
  }
  if (required) s["required"] = req;
  return s.dump();
}

std::string wide_enum(size_t n) {
  nlohmann::json values = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) values.push_back("value_" + std::to_string(i));
  return nlohmann::json{{"enum", values}}.dump();
}

GenerationRequest free_request() {
  GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 32;
  r.sampling.temperature = 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = std::string(GANTRY_DEPS_DIR) + "/models/tiny-llama.gguf";
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "schema_grammar_bench: %s is missing (run make setup)\n", path.c_str());
    return 1;
  }
  const size_t n_wide = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : gl::kMaxSchemaAlternatives;
  auto weights = gl::LlamaWeights::load(path);
  if (!weights.ok()) {
    std::fprintf(stderr, "schema_grammar_bench: %s\n", weights.status().to_string().c_str());
    return 1;
  }

  // Compile time of the largest accepted schemas (best of 3).
  struct Schema {
    std::string what;
    std::string text;
  };
  std::string long_names;  // required properties with names long enough to come near kMaxGrammarBytes
  {
    nlohmann::ordered_json o = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
    nlohmann::ordered_json req = nlohmann::ordered_json::array();
    for (size_t i = 0; i < 1000; ++i) {
      const std::string name = std::to_string(i) + std::string(60, 'n');
      o["properties"][name] = {{"type", "null"}};
      req.push_back(name);
    }
    o["required"] = req;
    long_names = o.dump();
  }
  std::string
      long_optional;  // the most optional properties with the longest names kMaxSchemaOptionalWork allows
  {
    nlohmann::ordered_json o = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
    const size_t n = gl::kMaxSchemaAlternatives;
    const size_t len = gl::kMaxSchemaOptionalWork / (n * n) - 32;  // 32: kOptionalWorkPerRule
    for (size_t i = 0; i < n; ++i) {
      std::string name = std::to_string(1000 + i);
      o["properties"][name + std::string(len - name.size(), '!')] = {{"type", "null"}};
    }
    long_optional = o.dump();
  }
  std::string enums;  // the most enum values, in enums of the most values each
  {
    nlohmann::ordered_json o = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
    for (size_t k = 0; k < gl::kMaxSchemaEnumValues / gl::kMaxSchemaAlternatives; ++k)
      o["properties"]["e" + std::to_string(k)] = nlohmann::json::parse(wide_enum(gl::kMaxSchemaAlternatives));
    enums = o.dump();
  }
  const Schema schemas[] = {
      {"widest: " + std::to_string(n_wide) + " optional properties", wide_object(n_wide, false)},
      {"most subschemas: " + std::to_string(gl::kMaxSchemaNodes - 1) + " required properties",
       wide_object(gl::kMaxSchemaNodes - 1, true)},
      {"most enum values: " + std::to_string(gl::kMaxSchemaEnumValues), enums},
      {"longest grammar: 1000 properties with 60-byte names", long_names},
      {"slowest optional properties: " + std::to_string(gl::kMaxSchemaAlternatives) +
           " with the longest names allowed",
       long_optional}};
  for (const auto& s : schemas) {
    double convert = 1e30, init = 1e30;
    size_t bytes = 0;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = Clock::now();
      auto g = gl::json_schema_grammar(s.text);
      convert = std::min(convert, ms_since(t0));
      if (!g.ok()) {
        std::printf("%s: refused: %s\n", s.what.c_str(), g.status().message().c_str());
        break;
      }
      bytes = g->size();
      t0 = Clock::now();
      llama_sampler* smpl = llama_sampler_init_grammar((*weights)->vocab(), g->c_str(), "root");
      init = std::min(init, ms_since(t0));
      if (!smpl) {
        std::fprintf(stderr, "schema_grammar_bench: llama.cpp rejected the grammar of %s\n", s.what.c_str());
        return 1;
      }
      llama_sampler_free(smpl);
    }
    if (bytes) {
      std::printf(
          "%s (%zu bytes of schema, %zu of grammar): convert %.2f ms, llama.cpp grammar init %.2f ms\n",
          s.what.c_str(), s.text.size(), bytes, convert, init);
    }
  }

  // A free greedy sequence alone, then next to a sequence constrained by the wide optional schema.
  gl::ContextOptions opts;
  opts.n_ctx = 1024;
  opts.n_seq_max = 2;
  opts.n_threads = 1;
  auto engine = gl::BatchEngine::create(*weights, opts);
  if (!engine.ok()) {
    std::fprintf(stderr, "schema_grammar_bench: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  auto& e = **engine;
  e.start();
  const OutputConstraint wide{OutputConstraint::Kind::kJsonSchema, schemas[0].text};
  const OutputConstraint any_object{OutputConstraint::Kind::kJsonObject, ""};
  // The free sequence's ms/token alone, or next to a sequence under `c` (which outlives it).
  auto free_ms_per_token = [&](const OutputConstraint* c, uint32_t seed) -> double {
    std::optional<gl::SequenceHandle> other;
    if (c) {
      GenerationRequest r;
      r.prompt = "Reply in JSON:";
      r.max_tokens = 512;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = seed;
      r.constraint = *c;
      auto h = e.submit(r);
      if (!h.ok()) return -1;
      other = *h;
    }
    auto f = e.generate(free_request());
    if (other) {
      other->cancel();
      (void)e.wait(*other);
    }
    if (!f.ok() || f->tokens.empty()) return -1;
    return f->generation_ms / static_cast<double>(f->tokens.size());
  };
  std::vector<double> alone, beside_object, beside_wide;
  for (uint32_t round = 0; round < 7; ++round) {
    alone.push_back(free_ms_per_token(nullptr, round));
    beside_object.push_back(free_ms_per_token(&any_object, round));
    beside_wide.push_back(free_ms_per_token(&wide, round));
    if (alone.back() < 0 || beside_object.back() < 0 || beside_wide.back() < 0) {
      std::fprintf(stderr, "schema_grammar_bench: a generation failed\n");
      return 1;
    }
  }
  e.stop();
  const double a = gantry::bench::median(alone), o = gantry::bench::median(beside_object),
               w = gantry::bench::median(beside_wide);
  std::printf(
      "a free sequence's ms/token: %.3f alone, %.3f next to a json_object request, %.3f next to the %s "
      "schema\n",
      a, o, w, schemas[0].what.c_str());
  std::printf("BENCH schema-grammar-neighbour ratio=%.2f\n", w / o);
  return 0;
}
