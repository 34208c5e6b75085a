#include "gantry/model/model_repository.h"

#include <algorithm>

#include "gantry/model/manifest.h"
#include "gantry/model/model_source.h"
#include "gantry/model/package.h"

namespace gantry::model {
namespace fs = std::filesystem;
namespace {

// A package archive as load_package() tells it (a .tar, or the ustar magic).
bool is_archive(const fs::path& p) {
  auto tar = is_package_archive(p);
  return tar.ok() && *tar;
}

// A file load_package() can take: a package archive, or a model whose format detect_model_format
// recognises (by its magic or its extension; a damaged one too, so that loading it says what is wrong).
bool servable_file(const fs::path& p) {
  if (is_archive(p)) return true;
  auto format = detect_model_format(p);
  return format.ok() || format.status().code() == StatusCode::kCorrupt;
}

}  // namespace

Result<RepositoryEntry> repository_entry(const fs::path& source) {
  std::error_code ec;
  auto from = [&](const Manifest& m) { return RepositoryEntry{m.name, source, m.name}; };
  if (is_model_url(source.string())) {
    // A bare model fetched into memory when it loads (Runtime::load): named by its file's stem.
    const std::string stem = fs::path(source_file_name(source.string())).stem().string();
    if (stem.empty() || stem == ".")
      return InvalidArgument(source.string() + ": the URL names no model file (http://host/path/NAME.gguf)");
    return RepositoryEntry{stem, source, stem};
  }
  if (fs::is_directory(source, ec)) {
    auto m = read_manifest(source / std::string(kManifestFileName));
    if (!m.ok()) return m.status().with_context("model package " + source.string());
    return from(*m);
  }
  if (!fs::is_regular_file(source, ec)) return NotFound(source.string() + ": no such model file or package");
  if (is_archive(source)) {
    // The manifest sits inside the archive: extracting it once here is the price of naming it.
    auto p = load_package(source, {.verify_checksums = false});
    if (!p.ok()) return p.status();
    return from(p->manifest());
  }
  return RepositoryEntry{source.stem().string(), source, source.stem().string()};
}

Status ModelRepository::add(const fs::path& source) {
  auto entry = repository_entry(source);
  if (!entry.ok()) return entry.status();
  std::lock_guard lock(mu_);
  return add_locked(std::move(*entry));
}

Status ModelRepository::add_locked(RepositoryEntry entry) {
  const std::string name = entry.name;
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    const auto same_source = [](const fs::path& a, const fs::path& b) {
      return is_model_url(a.string()) ? a == b : fs::weakly_canonical(a) == fs::weakly_canonical(b);
    };
    if (same_source(it->second->source, entry.source)) return Status();
    return InvalidArgument("two models are named '" + name + "': " + it->second->source.string() + " and " +
                           entry.source.string() +
                           " (rename one file or set a different `name` in its gantry.json)");
  }
  entries_.emplace(name, std::make_shared<const RepositoryEntry>(std::move(entry)));
  return Status();
}

Status ModelRepository::copy(std::string_view existing, const std::string& name, size_t max_copies) {
  std::lock_guard lock(mu_);
  auto from = entries_.find(existing);
  if (from == entries_.end()) return NotFound("model '" + std::string(existing) + "' is not served here");
  auto to = entries_.find(name);
  if (to != entries_.end()) {
    if (to->second->runtime_name == from->second->runtime_name) return Status();
    return InvalidArgument("the name '" + name + "' is taken by another model (" +
                           to->second->source.string() + "): delete it first");
  }
  if (const size_t n = copies_locked(); n >= max_copies) {
    return ResourceExhausted("the repository already holds " + std::to_string(n) +
                             " names given by copy (at most " + std::to_string(max_copies) +
                             ", --max-model-copies): delete one first");
  }
  RepositoryEntry e = *from->second;
  e.name = name;
  entries_.emplace(name, std::make_shared<const RepositoryEntry>(std::move(e)));
  return Status();
}

Status ModelRepository::rename(std::string_view from, const std::string& to) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(from);
  if (it == entries_.end()) return NotFound("model '" + std::string(from) + "' is not served here");
  if (from == to) return Status();
  if (entries_.contains(to))
    return InvalidArgument("the name '" + to + "' is taken by another model (" +
                           entries_.find(to)->second->source.string() + ")");
  RepositoryEntry e = *it->second;
  e.name = to;
  e.runtime_name = to;
  entries_.erase(it);
  entries_.emplace(to, std::make_shared<const RepositoryEntry>(std::move(e)));
  return Status();
}

std::shared_ptr<const RepositoryEntry> ModelRepository::remove(std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return nullptr;
  auto e = std::move(it->second);
  entries_.erase(it);
  return e;
}

size_t ModelRepository::copies_locked() const {
  size_t n = 0;
  for (const auto& [name, e] : entries_) n += e->runtime_name != name;
  return n;
}

size_t ModelRepository::copies() const {
  std::lock_guard lock(mu_);
  return copies_locked();
}

bool ModelRepository::in_use(std::string_view runtime_name) const {
  std::lock_guard lock(mu_);
  for (const auto& [_, e] : entries_) {
    if (e->runtime_name == runtime_name) return true;
  }
  return false;
}

bool ModelRepository::empty() const {
  std::lock_guard lock(mu_);
  return entries_.empty();
}

Status ModelRepository::add_directory(const fs::path& dir, std::vector<RepositoryProblem>* problems) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("--model-repository " + dir.string() + ": not a directory");
  // The directory is one package itself (KServe's storage initializer unpacks a package's directory
  // straight into /mnt/models).
  if (fs::exists(dir / std::string(kManifestFileName), ec)) return add(dir);
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto& p = e.path();
    // Hidden: an unfinished download (/api/pull's .NAME.gguf.partial-PID-N), a swap file, ..data.
    if (p.filename().string().starts_with(".")) continue;
    if (e.is_directory(ec)) {
      if (fs::exists(p / std::string(kManifestFileName), ec)) found.push_back(p);
    } else if (e.is_regular_file(ec) && servable_file(p)) {
      found.push_back(p);
    }
  }
  if (ec) return IoError("--model-repository " + dir.string() + ": " + ec.message());
  std::sort(found.begin(), found.end());
  for (const auto& p : found) {
    Status st = add(p);
    if (st.ok()) continue;
    if (!problems) return st;
    problems->push_back({p.filename().string(), p, st.message()});
  }
  return Status();
}

std::shared_ptr<const RepositoryEntry> ModelRepository::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second;
}

std::vector<RepositoryEntry> ModelRepository::entries() const {
  std::lock_guard lock(mu_);
  std::vector<RepositoryEntry> out;
  for (const auto& [_, e] : entries_) out.push_back(*e);
  return out;
}

}  // namespace gantry::model
