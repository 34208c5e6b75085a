// ModelRepository: the models `gantry serve` may load, by name. Built from the MODEL|PKG|URL arguments and
// the --model-repository directory (its model files, as model::detect_model_format tells them: .onnx,
// GGUF by its magic or its extension; package directories holding gantry.json; and package archives;
// never a hidden entry, whose name starts with '.': an unfinished download, an editor's swap file,
// Kubernetes' ..data links). A
// model's name is its package's `name`, else its file stem. Requests name models, never paths: only what is
// listed here can be loaded.
//
// The repository changes while serving (Ollama's /api/copy, /api/delete and /api/pull): every method is
// thread-safe, and find() hands out a snapshot of the entry that stays valid after a removal.
#pragma once

#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/model/manifest.h"

namespace gantry::model {

struct RepositoryEntry {
  std::string name;
  std::filesystem::path source;  // what Runtime::load gets (a path, or an http(s) URL)
  // The name the runtime loads it under: `name`, or for a second name given by copy() the first one's
  // (both names then share one loaded model).
  std::string runtime_name;
};

// A file or package of a --model-repository directory that could not be listed (no readable manifest, a
// name another model has): it is skipped and reported, the others are served.
struct RepositoryProblem {
  std::string name;  // its file or directory name in the repository
  std::filesystem::path source;
  std::string reason;
};

class ModelRepository {
 public:
  // Adds one model file or package; fails when its name is taken by another source.
  Status add(const std::filesystem::path& source);
  // Adds every model in `dir` (not recursive into packages; hidden entries skipped), or `dir` itself when
  // it is a package (holds gantry.json); NotFound when `dir` is not a directory. With `problems`, an entry
  // that cannot be added is recorded there and skipped; without, the first one is the error.
  Status add_directory(const std::filesystem::path& dir, std::vector<RepositoryProblem>* problems = nullptr);

  // Adds `name` for the model `existing` names (same source, same loaded model). NotFound when `existing`
  // is not listed; InvalidArgument when `name` is taken by another model (copying onto itself is a no-op);
  // ResourceExhausted when the repository already holds `max_copies` names given by copy().
  Status copy(std::string_view existing, const std::string& name,
              size_t max_copies = std::numeric_limits<size_t>::max());
  // How many listed names copy() gave (a name that loads under another's runtime name).
  size_t copies() const;
  // Lists the model `from` under `to` instead (it then also loads under `to`). NotFound when `from` is
  // not listed; InvalidArgument when `to` is taken by another model.
  Status rename(std::string_view from, const std::string& to);
  // Removes `name`; the removed entry, or nullptr when it was not listed.
  std::shared_ptr<const RepositoryEntry> remove(std::string_view name);
  // True when some listed name loads as `runtime_name`.
  bool in_use(std::string_view runtime_name) const;

  std::shared_ptr<const RepositoryEntry> find(std::string_view name) const;
  std::vector<RepositoryEntry> entries() const;  // by name
  bool empty() const;

 private:
  Status add_locked(RepositoryEntry entry);
  size_t copies_locked() const;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const RepositoryEntry>, std::less<>> entries_;
};

// The entry for the model at `source`: named by its package manifest's `name`, else its file stem. An
// http(s) URL of a bare .onnx / .gguf model is listed by its file's stem without being fetched: it is
// fetched into memory (never to disk) each time it loads.
Result<RepositoryEntry> repository_entry(const std::filesystem::path& source);

}  // namespace gantry::model
