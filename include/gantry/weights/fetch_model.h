// Fetching a model over http(s) into memory: the bytes go straight into a sealed MemoryImage (an
// anonymous memory file, gantry/model/memory_image.h), never to disk, for Runtime::load of a URL
// (RuntimeOptions::fetch_url).
#pragma once

#include <cstdint>
#include <string>

#include "gantry/core/status.h"
#include "gantry/model/model_source.h"
#include "gantry/weights/source.h"

namespace gantry::weights {

// Downloads the model at `url` (read as a WeightSource::url: http/https only, also across redirects,
// every transfer bounded in size and time, a server that answers other bytes than asked refused) in
// chunks into a new MemoryImage and returns it as a ModelSource named `url`. A model larger than
// `max_bytes` (the memory it may take) is ResourceExhausted before anything but its size is fetched
// (a server that ignores Range sends it whole, up to `max_bytes`). Errors name the URL.
Result<model::ModelSource> fetch_model_source(const std::string& url, uint64_t max_bytes,
                                              const HttpOptions& options = {});

}  // namespace gantry::weights
