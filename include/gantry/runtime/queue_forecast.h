// QueueForecast: how long a request on one model will take, from what that model's queue measured
// while serving (ModelQueue feeds it each generation's result), for deadlines kept or refused at
// admission.
//
// - Figures are moving averages (each new sample weighs kAlpha) of: milliseconds per prompt token (every
//   token of the prompt, those the prompt cache served included: a prompt costs what recent ones did, hits
//   and all; per evaluated token a prompt served from the cache but one token would cost its whole fixed
//   latency per token, and a repeated prompt would be predicted ten times too slow) and per generated
//   token (as moving sums of time over moving sums of tokens, so that a short request's fixed costs do not
//   count per token), the tokens a generation produced, a request's whole
//   time (from its first prompt token to its last generated one). Prompt speed and request time are taken
//   only from requests that did not wait for a place (their prompt time is not queue time).
// - The same figures are also kept per priority class (0 interactive, 1 batch: backend::Schedule), and a
//   prediction for a class uses its own once it has a sample: a batch tenant's long prompts, evaluated in
//   short chunks between other work, take longer per token than an interactive prompt evaluated at once,
//   and must not make the interactive ones look slow (nor the other way round).
// - predict_ms() is nullopt until a request has been measured: nothing known, nothing refused.
// - Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

namespace gantry::runtime {

class QueueForecast {
 public:
  static constexpr double kAlpha = 0.2;

  struct Figures {
    double prompt_ms_per_token = 0;
    double decode_ms_per_token = 0;
    double generated_tokens = 0;  // per request
    double request_ms = 0;        // one request's service time
    uint64_t samples = 0;         // requests measured
    uint64_t unwaited_samples = 0;
  };

  // One generation's result: its prompt tokens (the cache's hits included), its prompt and generation
  // times (GenerationResult::prompt_ms / generation_ms), tokens generated; `waited`: whether it
  // waited for a place (then its prompt_ms holds queue time and only its decode speed is used).
  // `priority_class`: the request's (0 interactive, 1 batch).
  void observe(int64_t prompt_tokens, double prompt_ms, int64_t generated, double generation_ms, bool waited,
               int priority_class = 0);

  Figures figures() const;                    // every request's
  Figures figures(int priority_class) const;  // one class's (samples 0 until it has one)

  // Milliseconds from admission to the end of a request with `prompt_tokens` and at most `max_tokens`
  // to generate, when `held` places of `capacity` are taken before it (those beyond capacity wait
  // ahead of it; a place frees every request time / capacity on average).
  // The request's own figures are its class's once that class was measured, else every request's.
  std::optional<double> predict_ms(size_t held, size_t capacity, int64_t prompt_tokens, int max_tokens,
                                   int priority_class = 0) const;

 private:
  // Figures and the moving sums behind the speeds (prompt ms and tokens, decode ms and steps) of one set
  // of requests.
  struct Track {
    Figures f;
    double prompt_ms = 0, prompt_tokens = 0, decode_ms = 0, decode_steps = 0;
    void observe(int64_t prompt_tokens, double prompt_ms, int64_t generated, double generation_ms,
                 bool waited);
  };
  static constexpr int kClasses = 2;
  static int class_index(int priority_class) { return priority_class > 0 ? 1 : 0; }

  mutable std::mutex mu_;
  Track all_;
  Track by_class_[kClasses];
};

}  // namespace gantry::runtime
