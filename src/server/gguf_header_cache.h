// GgufHeaderCache (private to src/server/): what Ollama's /api/tags, /api/ps and /api/show say about a GGUF
// file, read from its header once per version of the file rather than once per listed name per request
// (3,000 copies of one model used to cost 3,000 header parses per /api/tags: 18 s of a control thread).
//
// A file's version is its stamp (device, inode, size, modification and change times): a file replaced
// (renamed over) or rewritten gets a new stamp and is read again on its next use. Reading happens outside
// the cache's lock, so a slow or large header delays only the request that needs it.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gantry/protocol/ollama_codec.h"
#include "protocols.h"

namespace gantry::server {

struct FileStamp {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
// The stamp of the file at `path` (following links); nullopt when it cannot be stat'ed.
std::optional<FileStamp> file_stamp(const std::filesystem::path& path);

// What one version of a GGUF file's header says.
struct GgufFacts {
  bool readable = false;         // the header parsed (else the fields below are empty)
  ollama::ModelDetails details;  // format "gguf" even when unreadable
  std::string architecture;
  std::string chat_template;  // tokenizer.chat_template
  std::string model_info;     // ollama::gguf_model_info(file, /*verbose=*/false)
};

class GgufHeaderCache {
 public:
  // At most this many files are remembered; beyond it the cache starts over (a repository this large
  // still reads each header once per listing, never once per name).
  static constexpr size_t kMaxFiles = 4096;

  struct Found {
    FileStamp stamp;
    std::shared_ptr<const GgufFacts> facts;
  };
  // The facts of the GGUF file at `path` as it is now: from the cache when its stamp is unchanged, else
  // read (and counted in reads()). nullopt when the file cannot be stat'ed.
  std::optional<Found> get(const std::filesystem::path& path);
  // Headers read since the server started (gantry_model_header_reads_total).
  uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::map<std::string, Found, std::less<>> files_;
  std::atomic<uint64_t> reads_{0};
};

}  // namespace gantry::server
