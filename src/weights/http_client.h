// The libcurl client behind URL sources (internal to src/weights): only http and https, also across
// redirects; every transfer bounded in size and time; answers checked against what was asked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gantry/core/status.h"
#include "gantry/weights/source.h"
#include "weights/http_answer.h"  // HttpProbe, and how answers are checked

namespace gantry::weights {

// GET with "Range: bytes=0-0": the file's size from Content-Range, or the whole body when the server
// answers 200 (at most options.max_bytes and options.max_unranged_bytes).
Result<HttpProbe> http_probe(const std::string& url, const HttpOptions& options);

// Bytes [offset, offset + n) of a file of `total` bytes. The answer must be 206 with exactly that
// Content-Range and n body bytes.
Result<std::string> http_get_range(const std::string& url, uint64_t offset, uint64_t n, uint64_t total,
                                   const HttpOptions& options);

}  // namespace gantry::weights
