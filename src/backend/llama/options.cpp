#include "gantry/backend/llama/options.h"

#include <cmath>
#include <string>

namespace gantry::llama {

std::string_view kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF16:
      return "f16";
    case KvType::kF32:
      return "f32";
    case KvType::kBF16:
      return "bf16";
    case KvType::kQ8_0:
      return "q8_0";
    case KvType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

Result<KvType> parse_kv_type(std::string_view text) {
  for (KvType t : {KvType::kF16, KvType::kF32, KvType::kBF16, KvType::kQ8_0, KvType::kQ4_0}) {
    if (text == kv_type_name(t)) return t;
  }
  return InvalidArgument("unknown KV cache type '" + std::string(text) +
                         "' (use f16, f32, bf16, q8_0 or q4_0)");
}

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
  return Status::Ok();
}

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kEndOfGeneration:
      return "eog";
    case FinishReason::kMaxTokens:
      return "max_tokens";
    case FinishReason::kStopString:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

}  // namespace gantry::llama
