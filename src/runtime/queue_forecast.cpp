#include "gantry/runtime/queue_forecast.h"

#include <algorithm>
#include <cmath>

namespace gantry::runtime {
namespace {
void blend(double& avg, double sample, bool first) {
  avg = first ? sample : avg + QueueForecast::kAlpha * (sample - avg);
}
}  // namespace

void QueueForecast::Track::observe(int64_t prompt_in, double prompt_ms_sample, int64_t generated,
                                   double generation_ms, bool waited) {
  const bool first = f.samples == 0;
  // Speeds are time over tokens of the recent requests together (moving sums), not an average of each
  // request's ratio: a short request's fixed costs (a step's wait before its first chunk) would
  // otherwise count as if every one of its tokens cost that much, and predict long prompts far too slow.
  if (generated > 1) {
    // generation_ms runs from the first generated token to the last: generated - 1 steps.
    blend(decode_ms, generation_ms, decode_steps == 0);
    blend(decode_steps, static_cast<double>(generated - 1), decode_steps == 0);
    f.decode_ms_per_token = decode_ms / decode_steps;
  }
  blend(f.generated_tokens, static_cast<double>(std::max<int64_t>(generated, 0)), first);
  ++f.samples;
  if (waited) return;
  const bool first_unwaited = f.unwaited_samples == 0;
  if (prompt_in > 0) {
    const bool none = prompt_tokens == 0;
    blend(prompt_ms, prompt_ms_sample, none);
    blend(prompt_tokens, static_cast<double>(prompt_in), none);
    f.prompt_ms_per_token = prompt_ms / prompt_tokens;
  }
  blend(f.request_ms, prompt_ms_sample + generation_ms, first_unwaited);
  ++f.unwaited_samples;
}

void QueueForecast::observe(int64_t prompt_in, double prompt_ms, int64_t generated, double generation_ms,
                            bool waited, int priority_class) {
  std::lock_guard lock(mu_);
  all_.observe(prompt_in, prompt_ms, generated, generation_ms, waited);
  by_class_[class_index(priority_class)].observe(prompt_in, prompt_ms, generated, generation_ms, waited);
}

QueueForecast::Figures QueueForecast::figures() const {
  std::lock_guard lock(mu_);
  return all_.f;
}

QueueForecast::Figures QueueForecast::figures(int priority_class) const {
  std::lock_guard lock(mu_);
  return by_class_[class_index(priority_class)].f;
}

std::optional<double> QueueForecast::predict_ms(size_t held, size_t capacity, int64_t prompt_tokens,
                                                int max_tokens, int priority_class) const {
  std::lock_guard lock(mu_);
  if (all_.f.samples == 0) return std::nullopt;
  // How long a place takes to free is every request's matter (any running one may end); this request's
  // own prompt, speed and length are its class's once measured.
  const Figures& all = all_.f;
  const Figures& own = by_class_[class_index(priority_class)].f;
  const Figures& mine = own.samples > 0 ? own : all;
  capacity = std::max<size_t>(1, capacity);
  // Those waiting ahead, then this one, start as places free. The running ones are at every stage of
  // their service, so a place frees every service / capacity on average (not a whole service time at
  // once, which would refuse requests that would have made it): this one starts after
  // (held - capacity + 1) of them.
  double wait_ms = 0;
  if (held >= capacity) {
    const double service =
        all.unwaited_samples > 0 ? all.request_ms : all.generated_tokens * all.decode_ms_per_token;
    wait_ms = static_cast<double>(held - capacity + 1) * service / static_cast<double>(capacity);
  }
  // The tokens it is expected to generate: its max_tokens, or fewer when requests here end sooner.
  const double expected =
      std::min(static_cast<double>(std::max(1, max_tokens)), std::max(1.0, mine.generated_tokens));
  // A class measured only while waiting has no prompt speed of its own yet: every request's, then.
  const double prompt_ms_per_token =
      mine.prompt_ms_per_token > 0 ? mine.prompt_ms_per_token : all.prompt_ms_per_token;
  const double decode_ms_per_token =
      mine.decode_ms_per_token > 0 ? mine.decode_ms_per_token : all.decode_ms_per_token;
  return wait_ms + static_cast<double>(std::max<int64_t>(prompt_tokens, 0)) * prompt_ms_per_token +
         expected * decode_ms_per_token;
}

}  // namespace gantry::runtime
