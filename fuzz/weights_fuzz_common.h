// Shared by the weight loader's fuzz targets: any bytes give metadata or an error naming the input;
// every listed tensor loads with exactly the bytes its metadata promised (or a named error).
#pragma once

#include <cstdlib>
#include <string>

#include "gantry/weights/loader.h"

namespace gantry::weights::fuzz {

inline void check_source(const WeightSource& src) {
  auto l = WeightLoader::open(src);
  if (!l.ok()) {
    if (l.status().message().empty()) std::abort();
    return;
  }
  for (const auto& t : l->metadata().tensors) {
    auto w = l->load({t.name});
    if (!w.ok()) {
      if (w.status().message().empty()) std::abort();
      continue;
    }
    if (w->data.byte_size() != t.bytes || w->name != t.name) std::abort();
  }
}

}  // namespace gantry::weights::fuzz
