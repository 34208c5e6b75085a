// TextStream: turns token pieces into text that is safe to show: whole UTF-8 characters only, and
// nothing that might turn out to be the start of a stop string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gantry::llama {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop = {});

  // Adds one token's bytes; returns the text that can be shown now. Once a stop string completes,
  // returns the text before it and stopped() turns true; later pushes return nothing.
  std::string push(std::string_view piece);
  // At the end: whatever was held back (an incomplete character or a partial stop string).
  std::string flush();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_;
  std::string pending_;
  bool stopped_ = false;
};

// Bytes at the end of `s` that begin a UTF-8 character not yet complete (0..3).
size_t incomplete_utf8_tail(std::string_view s);

}  // namespace gantry::llama
