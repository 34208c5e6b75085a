// UTF-8 validity for text that came from outside (URLs, file names, client JSON) and must be written
// where only valid UTF-8 is allowed (Prometheus labels, JSON strings).
#pragma once

#include <string>
#include <string_view>

namespace gantry {

// True when `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool is_valid_utf8(std::string_view s);

// `s` with every ill-formed sequence replaced by U+FFFD (one per maximal invalid subpart, as the
// Unicode standard recommends); `s` unchanged when it is valid.
std::string to_valid_utf8(std::string_view s);

}  // namespace gantry
