// libFuzzer target: the text engine's per-request inputs (issue 34: a json_object request whose every
// allowed token was banned by logit_bias threw on the decoding thread and aborted the server). The bytes
// choose sampling parameters, logit biases (any id, any float: NaN and infinities too), stop strings, an
// output constraint (json_object, a JSON schema or a GBNF grammar from the bytes), choices, logprobs and
// ignore_eos; the request runs for a few tokens on the tiny test model. Any input must end in a result or
// an error with a message, never a crash, and the engine must serve the next request.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "gantry/backend/llama/batch_engine.h"
#include "gantry/core/log.h"

namespace {
using namespace gantry;

llama::BatchEngine& engine() {
  static std::unique_ptr<llama::BatchEngine> e = [] {
    gantry::set_log_level(spdlog::level::err);
    auto w = llama::LlamaWeights::load(std::string(GANTRY_DEPS_DIR) + "/models/tiny-llama.gguf");
    if (!w.ok()) {
      fprintf(stderr, "generation_request_fuzz: %s (run make setup)\n", w.status().to_string().c_str());
      std::abort();
    }
    llama::ContextOptions o;
    o.n_ctx = 256;
    o.n_seq_max = 2;
    o.n_threads = 1;
    o.threadpool = false;
    auto r = llama::BatchEngine::create(*w, o);
    if (!r.ok()) std::abort();
    return std::move(*r);
  }();
  return *e;
}

float any_float(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return -std::numeric_limits<float>::infinity();
    case 1:
      return std::numeric_limits<float>::infinity();
    case 2:
      return std::numeric_limits<float>::quiet_NaN();
    case 3:
      return -100.0f;
    default:
      return in.ConsumeFloatingPointInRange<float>(-200.0f, 200.0f);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  llama::BatchEngine& e = engine();
  const int32_t n_vocab = e.weights().n_vocab();
  backend::GenerationRequest r;
  r.max_tokens = in.ConsumeIntegralInRange<int>(-1, 6);
  r.n_choices = in.ConsumeIntegralInRange<int>(0, 3);
  r.ignore_eos = in.ConsumeBool();
  r.n_logprobs = in.ConsumeIntegralInRange<int>(-2, 3);
  r.n_top_logits = in.ConsumeIntegralInRange<int>(-1, 3);
  r.cache_prompt = in.ConsumeBool();
  backend::SamplingParams& s = r.sampling;
  if (in.ConsumeBool()) s.temperature = any_float(in);
  if (in.ConsumeBool()) s.top_k = in.ConsumeIntegralInRange<int>(-2, 100);
  if (in.ConsumeBool()) s.top_p = any_float(in);
  if (in.ConsumeBool()) s.min_p = any_float(in);
  if (in.ConsumeBool()) s.repeat_penalty = any_float(in);
  if (in.ConsumeBool()) s.presence_penalty = any_float(in);
  if (in.ConsumeBool()) s.frequency_penalty = any_float(in);
  if (in.ConsumeBool()) s.repeat_last_n = in.ConsumeIntegralInRange<int>(-3, 300);
  s.seed = in.ConsumeIntegral<uint32_t>();
  const int n_bias = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < n_bias; ++i) {
    s.logit_bias.emplace_back(in.ConsumeIntegralInRange<int32_t>(-2, n_vocab + 2), any_float(in));
  }
  if (in.ConsumeBool()) {
    // Ban a whole class of tokens (those containing a byte), as the crash's request did for '{'.
    const char c = in.ConsumeIntegral<char>();
    for (int32_t t = 0; t < n_vocab; ++t) {
      if (e.weights().token_to_piece(t, false).find(c) != std::string::npos)
        s.logit_bias.emplace_back(t, -std::numeric_limits<float>::infinity());
    }
  }
  const int n_stops = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < n_stops; ++i) r.stop.push_back(in.ConsumeRandomLengthString(16));
  using Kind = backend::OutputConstraint::Kind;
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 1:
      r.constraint = backend::OutputConstraint(Kind::kJsonObject);
      break;
    case 2:
      r.constraint = backend::OutputConstraint(Kind::kJsonSchema, in.ConsumeRandomLengthString(512));
      break;
    case 3:
      r.constraint.kind = Kind::kGrammar;
      r.constraint.grammar = in.ConsumeRandomLengthString(512);
      r.constraint.lazy = in.ConsumeBool();
      if (r.constraint.lazy) r.constraint.trigger_patterns.push_back(in.ConsumeRandomLengthString(16));
      break;
    default:
      break;
  }
  r.prompt = in.ConsumeRemainingBytesAsString();
  if (r.prompt.empty()) r.prompt = "Hello";

  auto result = e.generate(r);
  if (!result.ok()) {
    if (result.status().message().empty()) std::abort();  // an error must say what went wrong
  } else if (result->finish != backend::FinishReason::kCancelled &&
             static_cast<int>(result->tokens.size()) > r.max_tokens) {
    std::abort();  // never more than max_tokens
  }
  // The engine serves on.
  backend::GenerationRequest next;
  next.prompt = "Hello";
  next.max_tokens = 1;
  next.sampling.temperature = 0;
  if (!e.generate(next).ok()) std::abort();
  return 0;
}
