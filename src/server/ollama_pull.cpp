#include "ollama_pull.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
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

constexpr std::string_view kPartialMarker = ".gguf.partial-";

// A download's temporary file beside its destination: hidden (".NAME.gguf.partial-PID-N", so
// ModelRepository never lists it) and write-locked (flock) by this process for as long as it exists, so
// that remove_stale_partials() in any server sharing the directory can tell it from one a killed process
// left. Removed unless released.
class PartialFile {
 public:
  ~PartialFile() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove(path_, ec);
    }
    if (fd_ >= 0) ::close(fd_);  // drops the lock
  }
  // Creates and locks a new file in `dir` for the model `served`.
  Status create(const fs::path& dir, const std::string& served) {
    static std::atomic<uint64_t> counter{0};
    for (int attempt = 0; attempt < 8; ++attempt) {
      const fs::path p = dir / ("." + served + std::string(kPartialMarker) + std::to_string(::getpid()) +
                                "-" + std::to_string(counter.fetch_add(1)));
      const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        if (errno == EEXIST) continue;
        return IoError("pull: cannot write " + p.string() + ": " + std::strerror(errno));
      }
      // Locked, and still the file at `p`: a cleaner that took the lock between open and flock (it saw an
      // unlocked partial) has unlinked it; then start over with a new name.
      struct stat held {
      }, named{};
      if (::flock(fd, LOCK_EX) == 0 && ::fstat(fd, &held) == 0 && ::stat(p.c_str(), &named) == 0 &&
          held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
        fd_ = fd;
        path_ = p;
        return Status();
      }
      ::close(fd);
    }
    return IoError("pull: cannot create a temporary file in " + dir.string());
  }
  const fs::path& path() const { return path_; }
  Status write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return IoError("pull: writing " + path_.string() + " failed: " + std::strerror(errno));
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return Status();
  }
  // Flushed to the disk, so that the rename publishes a whole file even across a power cut.
  Status sync() {
    if (::fsync(fd_) != 0)
      return IoError("pull: writing " + path_.string() + " failed: " + std::strerror(errno));
    return Status();
  }
  void release() { path_.clear(); }

 private:
  int fd_ = -1;
  fs::path path_;
};

// The process id in a partial download's name (".NAME.gguf.partial-PID-N"), or 0.
pid_t partial_owner(const std::string& file) {
  if (!file.starts_with(".")) return 0;
  const size_t at = file.rfind(kPartialMarker);
  if (at == std::string::npos) return 0;
  const std::string rest = file.substr(at + kPartialMarker.size());  // "PID-N"
  const size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos) return 0;
  pid_t pid = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (rest[i] < '0' || rest[i] > '9' || pid > 100'000'000) return 0;
    pid = pid * 10 + (rest[i] - '0');
  }
  return pid;
}

}  // namespace

std::vector<fs::path> remove_stale_partials(const fs::path& dir) {
  std::vector<fs::path> removed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    const pid_t pid = partial_owner(file);
    if (pid <= 0 || !e.is_regular_file(ec)) continue;
    // Its process lives (here, or a reused id): kept. A process of another PID namespace sharing the
    // directory holds its file's lock, which the test below sees.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat held {
    }, named{};
    // Unlocked (its writer is gone) and still the file of that name: removed while holding the lock.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 &&
        ::stat(e.path().c_str(), &named) == 0 && held.st_dev == named.st_dev && held.st_ino == named.st_ino &&
        ::unlink(e.path().c_str()) == 0)
      removed.push_back(e.path());
    ::close(fd);
  }
  return removed;
}

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
  PartialFile partial;
  GANTRY_RETURN_IF_ERROR(partial.create(dir, served));
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
    GANTRY_RETURN_IF_ERROR(partial.write(view));
    done += n;
    if (!progress(ollama::pull_progress(layer->digest, layer->size, done)))
      return Cancelled("pull " + layer->digest + ": the client went away");
  }
  GANTRY_RETURN_IF_ERROR(partial.sync());
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
