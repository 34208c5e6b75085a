#include "gantry/backend/generation.h"

#include <cmath>
#include <limits>
#include <string>

#include "gantry/core/enum_names.h"

namespace gantry::backend {

Status validate(const SamplingParams& p) {
  auto bad = [](const std::string& what) { return InvalidArgument("invalid sampling parameter: " + what); };
  if (!std::isfinite(p.temperature) || p.temperature < 0) {
    return bad("temperature must be >= 0 (0 = greedy), got " + std::to_string(p.temperature));
  }
  if (p.top_k < 0) return bad("top_k must be >= 0 (0 = off), got " + std::to_string(p.top_k));
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1) {
    return bad("top_p must be in (0, 1] (1 = off), got " + std::to_string(p.top_p));
  }
  if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1) {
    return bad("min_p must be in [0, 1] (0 = off), got " + std::to_string(p.min_p));
  }
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0) {
    return bad("repeat_penalty must be > 0 (1 = off), got " + std::to_string(p.repeat_penalty));
  }
  if (p.repeat_last_n < -1) return bad("repeat_last_n must be >= -1, got " + std::to_string(p.repeat_last_n));
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    return bad("presence_penalty must be in [-2, 2] (0 = off), got " + std::to_string(p.presence_penalty));
  }
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    return bad("frequency_penalty must be in [-2, 2] (0 = off), got " + std::to_string(p.frequency_penalty));
  }
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0) return bad("logit_bias: token id " + std::to_string(token) + " is negative");
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      return bad("logit_bias: the bias of token " + std::to_string(token) +
                 " must be a number or -inf, got " + std::to_string(bias));
    }
  }
  return Status::Ok();
}

namespace {
constexpr std::string_view kContextLengthExceeded = "context length exceeded: ";
}  // namespace

Status context_length_exceeded(std::string_view details) {
  return InvalidArgument(std::string(kContextLengthExceeded) + std::string(details));
}

bool is_context_length_exceeded(const Status& st) {
  return st.code() == StatusCode::kInvalidArgument &&
         st.message().find(kContextLengthExceeded) != std::string::npos;
}

namespace {
constexpr auto kFinishReasons =
    enum_names<FinishReason>("finish reason", {{FinishReason::kEndOfGeneration, "eog"},
                                               {FinishReason::kMaxTokens, "max_tokens"},
                                               {FinishReason::kStopString, "stop"},
                                               {FinishReason::kCancelled, "cancelled"}});
}  // namespace

std::string_view finish_reason_name(FinishReason r) { return kFinishReasons.name_of(r, "?"); }

std::span<const GenerationResult> choice_results(const GenerationResult& r) {
  if (r.choices.empty()) return {&r, 1};
  return r.choices;
}

int completion_tokens(const GenerationResult& r) {
  int n = 0;
  for (const auto& c : choice_results(r)) n += static_cast<int>(c.tokens.size());
  return n;
}

}  // namespace gantry::backend
