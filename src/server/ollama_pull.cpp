#include "ollama_pull.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <system_error>
#include <vector>

#include "gantry/model/sha256.h"
#include "gantry/weights/source.h"

namespace gantry::server {
namespace {
namespace fs = std::filesystem;

constexpr uint64_t kMaxManifestBytes = 1 << 20;
constexpr uint64_t kChunkBytes = 4 << 20;

bool is_url(std::string_view s) { return s.starts_with("http://") || s.starts_with("https://"); }

std::string trimmed(std::string_view base) {
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  return std::string(base);
}

std::string manifest_location(std::string_view source, const ollama::ModelPath& p) {
  if (is_url(source)) return trimmed(source) + "/v2/" + p.name_space + "/" + p.model + "/manifests/" + p.tag;
  return (fs::path(source) / "manifests" / p.host / p.name_space / p.model / p.tag).string();
}

std::string blob_location(std::string_view source, const ollama::ModelPath& p, std::string_view digest) {
  if (is_url(source))
    return trimmed(source) + "/v2/" + p.name_space + "/" + p.model + "/blobs/" + std::string(digest);
  std::string file(digest);
  file[file.find(':')] = '-';  // sha256:<hex> is stored as blobs/sha256-<hex>
  return (fs::path(source) / "blobs" / file).string();
}

// A temporary file beside the destination, removed unless released.
class PartialFile {
 public:
  explicit PartialFile(fs::path path) : path_(std::move(path)) {}
  ~PartialFile() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove(path_, ec);
    }
  }
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

}  // namespace

Result<fs::path> pull_model(std::string_view source, const ollama::ModelPath& path, const fs::path& dir,
                            const std::function<bool(std::string)>& progress) {
  const std::string served = ollama::served_name(path);
  progress(ollama::pull_status("pulling manifest"));
  const std::string where = manifest_location(source, path);
  auto manifest_source = weights::WeightSource::open(where);
  if (!manifest_source.ok()) {
    // Named relative to the source: a client need not learn the server's paths.
    const std::string shown =
        is_url(source) ? where
                       : "manifests/" + path.host + "/" + path.name_space + "/" + path.model + "/" + path.tag;
    if (manifest_source.status().code() == StatusCode::kNotFound)
      return NotFound("pull model manifest: the pull source has no model '" + served + "' (no " + shown +
                      ")");
    return manifest_source.status().with_context("pull model manifest " + where);
  }
  if (manifest_source->size() > kMaxManifestBytes)
    return Corrupt("pull model manifest " + where + ": larger than 1 MiB; not a manifest");
  GANTRY_ASSIGN_OR_RETURN(auto bytes, manifest_source->read(0, manifest_source->size()));
  const std::string manifest(reinterpret_cast<const char*>(bytes.data.data()), bytes.data.size());
  auto layer = ollama::model_layer(manifest);
  if (!layer.ok()) return layer.status().with_context("pull model manifest " + where);

  const std::string blob_where = blob_location(source, path, layer->digest);
  auto blob = weights::WeightSource::open(blob_where);
  if (!blob.ok()) return blob.status().with_context("pull " + layer->digest);
  if (blob->size() != layer->size) {
    return Corrupt("pull " + layer->digest + ": the blob has " + std::to_string(blob->size()) +
                   " bytes, the manifest says " + std::to_string(layer->size));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  static std::atomic<uint64_t> counter{0};
  PartialFile partial(dir / ("." + served + ".gguf.partial-" + std::to_string(::getpid()) + "-" +
                             std::to_string(counter.fetch_add(1))));
  std::ofstream out(partial.path(), std::ios::binary | std::ios::trunc);
  if (!out) return IoError("pull: cannot write " + partial.path().string());
  model::Sha256 hash;
  std::vector<std::byte> buf(
      static_cast<size_t>(std::min<uint64_t>(kChunkBytes, std::max<uint64_t>(1, layer->size))));
  progress(ollama::pull_progress(layer->digest, layer->size, 0));
  bool gguf = false;
  for (uint64_t done = 0; done < layer->size;) {
    const uint64_t n = std::min<uint64_t>(buf.size(), layer->size - done);
    std::span<std::byte> chunk(buf.data(), static_cast<size_t>(n));
    GANTRY_RETURN_IF_ERROR(blob->read_into(done, chunk));
    const std::string_view view(reinterpret_cast<const char*>(chunk.data()), chunk.size());
    if (done == 0) gguf = view.starts_with("GGUF");
    GANTRY_RETURN_IF_ERROR(hash.update(view));
    out.write(view.data(), static_cast<std::streamsize>(view.size()));
    if (!out) return IoError("pull: writing " + partial.path().string() + " failed");
    done += n;
    if (!progress(ollama::pull_progress(layer->digest, layer->size, done)))
      return Cancelled("pull " + layer->digest + ": the client went away");
  }
  out.close();
  if (!out) return IoError("pull: writing " + partial.path().string() + " failed");
  progress(ollama::pull_status("verifying sha256 digest"));
  GANTRY_ASSIGN_OR_RETURN(std::string hex, hash.hex());
  if ("sha256:" + hex != layer->digest) {
    return Corrupt("digest mismatch: the blob's sha256 is " + hex + ", the manifest says " + layer->digest +
                   " (a corrupted download or source); the model was not added");
  }
  if (!gguf) return Corrupt("pull " + layer->digest + ": the model layer is not a GGUF file");
  progress(ollama::pull_status("writing manifest"));
  const fs::path target = dir / (served + ".gguf");
  fs::rename(partial.path(), target, ec);
  if (ec) return IoError("pull: cannot move the model to " + target.string() + ": " + ec.message());
  partial.release();
  return target;
}

}  // namespace gantry::server
