// BackendRegistry: the backends available in this process, found by name or model format.
//
// Not a global: the runtime (or a test) owns one and registers the backends it links.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/backend.h"

namespace gantry::backend {

class BackendRegistry {
 public:
  // Fails when a backend of the same name is already registered.
  Status add(std::unique_ptr<Backend> backend);

  Backend* find(std::string_view name) const;

  // The first registered backend whose capabilities list `format` ("onnx", "gguf").
  Result<Backend*> for_format(std::string_view format) const;

  // Backends whose capabilities meet `req`; every other one with its reasons (one string each).
  struct Match {
    std::vector<Backend*> suitable;
    std::vector<std::pair<std::string, std::vector<std::string>>> rejected;
  };
  Match match(const Requirements& req) const;

  std::vector<Backend*> all() const;

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

}  // namespace gantry::backend
