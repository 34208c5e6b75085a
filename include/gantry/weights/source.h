// WeightSource: where weight bytes come from — a mapped file, a memory span (owned or borrowed), an
// http(s) URL read with Range requests, or a Hugging Face style checkpoint directory.
//
// Contract: read() is bounds-checked against size() and returns bytes with an owner that keeps them
// alive (the mapping, the memory, or a downloaded buffer). A URL source never follows a redirect to a
// scheme other than http/https, bounds every transfer in size and time, and refuses a server whose
// answer does not match what was asked (wrong Content-Range, short or long body) with an error naming
// the URL. Copies of a WeightSource share the same underlying source.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::weights {

struct HttpOptions {
  // Largest remote file accepted.
  uint64_t max_bytes = uint64_t{256} << 30;
  // Largest whole-file download when a server ignores Range (held in memory).
  uint64_t max_unranged_bytes = uint64_t{4} << 30;
  std::chrono::milliseconds connect_timeout{10'000};
  // Whole-transfer limit for one request.
  std::chrono::milliseconds timeout{600'000};
  // A transfer slower than 1 KiB/s for this long is abandoned.
  std::chrono::seconds stall_timeout{30};
  long max_redirects = 5;
  // Sent with every request of this source ("Name: value", ferrum's default headers): an API key, a
  // cookie. A header with CR/LF or without ':' is refused when the source is made. A Hub file
  // (hf://, gantry/weights/hub_url.h) adds its token's Authorization header here.
  std::vector<std::string> headers;
};

// Bytes read from a source; `owner` keeps `data` valid (null when the source's own lifetime does).
struct Bytes {
  std::span<const std::byte> data;
  std::shared_ptr<const void> owner;
};

class WeightSource {
 public:
  enum class Kind { kFile, kMemory, kUrl, kDirectory };

  // Maps a regular file read-only.
  static Result<WeightSource> file(const std::filesystem::path& path);
  // Borrows `bytes`: the caller keeps them alive while the source, and any weight loaded from it without a
  // copy (its tensor points into `bytes`), is used.
  static WeightSource borrowed(std::span<const std::byte> bytes, std::string label = "<memory>");
  // Owns `bytes`.
  static WeightSource owned(std::string bytes, std::string label = "<memory>");
  // An http:// or https:// URL, or a Hub file (hf://OWNER/REPO[@REVISION]/PATH, resolved by
  // resolve_hub_file; the label stays the hf:// name); asks the server for the size (a one-byte Range
  // request).
  static Result<WeightSource> url(std::string url, const HttpOptions& options = {});
  // A checkpoint directory (model.safetensors, model.safetensors.index.json + shards, config.json).
  static Result<WeightSource> directory(const std::filesystem::path& path);
  // Whichever of the above `spec` names: a URL, a directory or a file.
  static Result<WeightSource> open(std::string_view spec, const HttpOptions& options = {});

  Kind kind() const;
  // The path, URL or memory label, for messages.
  const std::string& label() const;
  // Bytes in the source (0 for a directory).
  uint64_t size() const;
  // The file or directory (empty for memory and URLs).
  const std::filesystem::path& path() const;
  // The URL (empty unless kind() == kUrl).
  const std::string& url_string() const;
  const HttpOptions& http_options() const;

  // Bytes [offset, offset + n). OutOfRange reads are InvalidArgument naming the source. A URL source
  // downloads them (owned); file and memory sources return a view.
  Result<Bytes> read(uint64_t offset, uint64_t n) const;
  // Copies bytes [offset, offset + dst.size()) into `dst`: pread() for a file (no page faults on the
  // mapping), a Range download for a URL.
  Status read_into(uint64_t offset, std::span<std::byte> dst) const;
  // The whole contents when they are in memory (file or memory source), else nullptr.
  const std::byte* mapped() const;

  // Bytes every WeightSource in this process has handed out through read() and read_into() (views of a
  // mapping and memory included), plus what URL sources fetched to learn their size (a one-byte probe,
  // or the whole file from a server that ignores Range). Monotonic; callers take differences, e.g. to show
  // that planning a checkpoint read only its headers.
  static uint64_t total_bytes_read();

  // Asks the kernel to read the file ahead (madvise WILLNEED + readahead); a no-op for other kinds.
  Status preload() const;

  struct Impl;

 private:
  explicit WeightSource(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

std::string_view source_kind_name(WeightSource::Kind k);

}  // namespace gantry::weights
