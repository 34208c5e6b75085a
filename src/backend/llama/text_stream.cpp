#include "backend/llama/text_stream.h"

#include <algorithm>

namespace gantry::llama {

size_t incomplete_utf8_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 1;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

TextStream::TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {
  stop_.erase(std::remove_if(stop_.begin(), stop_.end(), [](const std::string& s) { return s.empty(); }),
              stop_.end());
}

std::string TextStream::push(std::string_view piece) {
  if (stopped_) return {};
  pending_ += piece;
  // A stop string can only start inside pending_: everything shown before had no stop prefix held back.
  size_t first = std::string::npos;
  for (const auto& s : stop_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  size_t hold = 0;
  for (const auto& s : stop_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  size_t safe = pending_.size() - hold;
  safe -= incomplete_utf8_tail(std::string_view(pending_).substr(0, safe));
  std::string out = pending_.substr(0, safe);
  pending_.erase(0, safe);
  return out;
}

std::string TextStream::flush() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace gantry::llama
