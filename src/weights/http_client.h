// The libcurl client behind URL sources (internal to src/weights): only http and https, also across
// redirects; every transfer bounded in size and time; answers checked against what was asked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gantry/core/status.h"
#include "gantry/weights/source.h"

namespace gantry::weights {

struct HttpProbe {
  uint64_t size = 0;
  // Set when the server ignored the Range request and sent the whole file (then held here).
  std::optional<std::string> whole;
};

// GET with "Range: bytes=0-0": the file's size from Content-Range, or the whole body when the server
// answers 200 (at most options.max_bytes and options.max_unranged_bytes).
Result<HttpProbe> http_probe(const std::string& url, const HttpOptions& options);

// Bytes [offset, offset + n) of a file of `total` bytes. The answer must be 206 with exactly that
// Content-Range and n body bytes.
Result<std::string> http_get_range(const std::string& url, uint64_t offset, uint64_t n, uint64_t total,
                                   const HttpOptions& options);

}  // namespace gantry::weights
