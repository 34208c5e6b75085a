#include "gantry/runtime/queue_forecast.h"

#include <algorithm>
#include <cmath>

namespace gantry::runtime {
namespace {
void blend(double& avg, double sample, bool first) {
  avg = first ? sample : avg + QueueForecast::kAlpha * (sample - avg);
}
}  // namespace

void QueueForecast::observe(int64_t prompt_evaluated, double prompt_ms, int64_t generated,
                            double generation_ms, bool waited) {
  std::lock_guard lock(mu_);
  const bool first = f_.samples == 0;
  // Speeds are time over tokens of the recent requests together (moving sums), not an average of each
  // request's ratio: a short request's fixed costs (a step's wait before its first chunk) would
  // otherwise count as if every one of its tokens cost that much, and predict long prompts far too slow.
  if (generated > 1) {
    // generation_ms runs from the first generated token to the last: generated - 1 steps.
    blend(decode_ms_, generation_ms, decode_steps_ == 0);
    blend(decode_steps_, static_cast<double>(generated - 1), decode_steps_ == 0);
    f_.decode_ms_per_token = decode_ms_ / decode_steps_;
  }
  blend(f_.generated_tokens, static_cast<double>(std::max<int64_t>(generated, 0)), first);
  ++f_.samples;
  if (waited) return;
  const bool first_unwaited = f_.unwaited_samples == 0;
  if (prompt_evaluated > 0) {
    const bool none = prompt_tokens_ == 0;
    blend(prompt_ms_, prompt_ms, none);
    blend(prompt_tokens_, static_cast<double>(prompt_evaluated), none);
    f_.prompt_ms_per_token = prompt_ms_ / prompt_tokens_;
  }
  blend(f_.request_ms, prompt_ms + generation_ms, first_unwaited);
  ++f_.unwaited_samples;
}

QueueForecast::Figures QueueForecast::figures() const {
  std::lock_guard lock(mu_);
  return f_;
}

std::optional<double> QueueForecast::predict_ms(size_t held, size_t capacity, int64_t prompt_tokens,
                                                int max_tokens) const {
  std::lock_guard lock(mu_);
  if (f_.samples == 0) return std::nullopt;
  capacity = std::max<size_t>(1, capacity);
  // Those waiting ahead, then this one, start as places free. The running ones are at every stage of
  // their service, so a place frees every service / capacity on average (not a whole service time at
  // once, which would refuse requests that would have made it): this one starts after
  // (held - capacity + 1) of them.
  double wait_ms = 0;
  if (held >= capacity) {
    const double service =
        f_.unwaited_samples > 0 ? f_.request_ms : f_.generated_tokens * f_.decode_ms_per_token;
    wait_ms = static_cast<double>(held - capacity + 1) * service / static_cast<double>(capacity);
  }
  // The tokens it is expected to generate: its max_tokens, or fewer when requests here end sooner.
  const double expected =
      std::min(static_cast<double>(std::max(1, max_tokens)), std::max(1.0, f_.generated_tokens));
  return wait_ms + static_cast<double>(std::max<int64_t>(prompt_tokens, 0)) * f_.prompt_ms_per_token +
         expected * f_.decode_ms_per_token;
}

}  // namespace gantry::runtime
