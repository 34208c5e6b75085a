// WeightSource's state (internal to src/weights).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "gantry/core/file_io.h"
#include "gantry/weights/source.h"

namespace gantry::weights {

struct WeightSource::Impl {
  Kind kind = Kind::kMemory;
  std::string label;
  std::filesystem::path path;
  std::string url;
  HttpOptions http;
  uint64_t size = 0;
  // In-memory contents (file mapping, owned or borrowed memory, or a whole download from a server
  // that ignores Range); `owner` keeps them alive (null for borrowed memory).
  const std::byte* data = nullptr;
  std::shared_ptr<const void> owner;
  // A file source's descriptor, for read_into().
  std::shared_ptr<const UniqueFd> fd;
};

}  // namespace gantry::weights
