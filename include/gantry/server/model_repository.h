// ModelRepository: the models `gantry serve` may load, by name. Built from the MODEL|PKG arguments and
// the --model-repository directory (its .onnx/.gguf files, package directories holding gantry.json,
// and .tar packages). A model's name is its package's `name`, else its file stem. Requests name models,
// never paths: only what is listed here can be loaded.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/model/manifest.h"

namespace gantry::server {

struct RepositoryEntry {
  std::string name;
  std::filesystem::path source;                    // what Runtime::load gets
  std::optional<model::DynamicBatching> batching;  // the package manifest's dynamic_batching
};

class ModelRepository {
 public:
  // Adds one model file or package; fails when its name is taken by another source.
  Status add(const std::filesystem::path& source);
  // Adds every model in `dir` (not recursive into packages); NotFound when `dir` is not a directory.
  Status add_directory(const std::filesystem::path& dir);

  const RepositoryEntry* find(std::string_view name) const;
  std::vector<RepositoryEntry> entries() const;  // by name
  bool empty() const { return entries_.empty(); }

 private:
  std::map<std::string, RepositoryEntry, std::less<>> entries_;
};

// The entry for the model at `source`: named by its package manifest's `name`, else its file stem.
Result<RepositoryEntry> repository_entry(const std::filesystem::path& source);

}  // namespace gantry::server
