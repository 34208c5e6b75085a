#include "gguf_header_cache.h"

#include <sys/stat.h>

#include "gantry/model/gguf.h"

namespace gantry::server {

std::optional<FileStamp> file_stamp(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  FileStamp s;
  s.device = static_cast<uint64_t>(st.st_dev);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  return s;
}

std::optional<GgufHeaderCache::Found> GgufHeaderCache::get(const std::filesystem::path& path) {
  auto stamp = file_stamp(path);
  if (!stamp) return std::nullopt;
  const std::string key = path.string();
  {
    std::lock_guard lock(mu_);
    auto it = files_.find(key);
    if (it != files_.end() && it->second.stamp == *stamp) return it->second;
  }
  // Read outside the lock: other files' (and other models') metadata never waits for this one.
  auto facts = std::make_shared<GgufFacts>();
  facts->details.format = "gguf";
  reads_.fetch_add(1, std::memory_order_relaxed);
  if (auto g = model::GgufFile::open(path); g.ok()) {
    facts->readable = true;
    facts->details = ollama::gguf_details(*g);
    facts->architecture = g->architecture();
    facts->chat_template = g->get_string("tokenizer.chat_template").value_or("");
    facts->model_info = ollama::gguf_model_info(*g, false);
  }
  // The stamp taken before reading: a file changed while it was read is read again next time.
  Found found{*stamp, std::move(facts)};
  std::lock_guard lock(mu_);
  if (files_.size() >= kMaxFiles && !files_.contains(key)) files_.clear();
  files_[key] = found;
  return found;
}

}  // namespace gantry::server
