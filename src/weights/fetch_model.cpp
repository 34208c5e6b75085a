#include "gantry/weights/fetch_model.h"

#include <algorithm>

#include "gantry/model/memory_image.h"

namespace gantry::weights {

namespace {
// Each Range request's size: the download holds at most this much beside the image.
constexpr uint64_t kChunk = uint64_t{64} << 20;
}  // namespace

Result<model::ModelSource> fetch_model_source(const std::string& url, uint64_t max_bytes,
                                              const HttpOptions& options) {
  HttpOptions o = options;
  o.max_bytes = std::min(o.max_bytes, max_bytes);
  o.max_unranged_bytes = std::min(o.max_unranged_bytes, max_bytes);
  auto src = WeightSource::url(url, o);
  if (!src.ok()) {
    if (src.status().code() == StatusCode::kResourceExhausted)
      return ResourceExhausted(src.status().message() + " (a model fetched into memory may take at most " +
                               std::to_string(max_bytes) + " bytes, the CPU memory budget)");
    return src.status();
  }
  GANTRY_ASSIGN_OR_RETURN(auto image, model::MemoryImage::create(model::source_file_name(url), src->size()));
  const std::span<std::byte> dst = image->writable();
  for (uint64_t off = 0; off < dst.size(); off += kChunk) {
    const uint64_t n = std::min<uint64_t>(kChunk, dst.size() - off);
    GANTRY_RETURN_IF_ERROR(src->read_into(off, dst.subspan(off, n)));
  }
  GANTRY_RETURN_IF_ERROR(image->seal());
  return model::ModelSource::memory(std::shared_ptr<const model::MemoryImage>(std::move(image)), url);
}

}  // namespace gantry::weights
