#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "gantry/core/file_io.h"
#include "gantry/weights/hub_url.h"
#include "weights/http_client.h"
#include "weights/source_impl.h"

namespace gantry::weights {
namespace {

// Unmaps on destruction.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  Mapping(void* a, size_t s) : addr(a), size(s) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (addr != nullptr) munmap(addr, size);
  }
};

bool is_url(std::string_view s) { return s.starts_with("http://") || s.starts_with("https://"); }

std::atomic<uint64_t> g_bytes_read{0};
void count(uint64_t n) { g_bytes_read.fetch_add(n, std::memory_order_relaxed); }

}  // namespace

std::string_view source_kind_name(WeightSource::Kind k) {
  switch (k) {
    case WeightSource::Kind::kFile:
      return "file";
    case WeightSource::Kind::kMemory:
      return "memory";
    case WeightSource::Kind::kUrl:
      return "url";
    case WeightSource::Kind::kDirectory:
      return "directory";
  }
  return "unknown";
}

Result<WeightSource> WeightSource::file(const std::filesystem::path& path) {
  GANTRY_ASSIGN_OR_RETURN(UniqueFd fd, open_for_read(path));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return IoError(path.string() + ": fstat: " + std::strerror(errno));
  auto impl = std::make_shared<Impl>();
  impl->kind = Kind::kFile;
  impl->label = path.string();
  impl->path = path;
  impl->size = static_cast<uint64_t>(st.st_size);
  if (impl->size > 0) {
    void* addr = mmap(nullptr, impl->size, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (addr == MAP_FAILED) return IoError(path.string() + ": cannot map the file: " + std::strerror(errno));
    auto mapping = std::make_shared<const Mapping>(addr, impl->size);
    impl->data = static_cast<const std::byte*>(addr);
    impl->owner = mapping;
  }
  impl->fd = std::make_shared<const UniqueFd>(std::move(fd));
  return WeightSource(std::move(impl));
}

WeightSource WeightSource::borrowed(std::span<const std::byte> bytes, std::string label) {
  auto impl = std::make_shared<Impl>();
  impl->kind = Kind::kMemory;
  impl->label = std::move(label);
  impl->size = bytes.size();
  impl->data = bytes.data();
  return WeightSource(std::move(impl));
}

WeightSource WeightSource::owned(std::string bytes, std::string label) {
  auto impl = std::make_shared<Impl>();
  impl->kind = Kind::kMemory;
  impl->label = std::move(label);
  auto holder = std::make_shared<const std::string>(std::move(bytes));
  impl->size = holder->size();
  impl->data = reinterpret_cast<const std::byte*>(holder->data());
  impl->owner = holder;
  return WeightSource(std::move(impl));
}

Result<WeightSource> WeightSource::url(std::string url, const HttpOptions& options) {
  HttpOptions http = options;
  std::string label = url;
  if (is_hub_file(url)) {
    GANTRY_ASSIGN_OR_RETURN(HubFile hub, resolve_hub_file(url));
    url = std::move(hub.url);
    http.headers.insert(http.headers.end(), hub.headers.begin(), hub.headers.end());
  }
  if (!is_url(url)) return InvalidArgument(url + ": not an http://, https:// or hf:// URL");
  for (const std::string& h : http.headers) {
    const auto colon = h.find(':');
    if (colon == std::string::npos || colon == 0 || h.find_first_of("\r\n") != std::string::npos)
      return InvalidArgument(label + ": a request header must be one 'Name: value' line; got one of " +
                             std::to_string(h.size()) + " characters that is not");  // never echo a secret
  }
  GANTRY_ASSIGN_OR_RETURN(HttpProbe probe, http_probe(url, http));
  auto impl = std::make_shared<Impl>();
  impl->kind = Kind::kUrl;
  impl->label = std::move(label);
  impl->url = std::move(url);
  impl->http = std::move(http);
  impl->size = probe.size;
  count(probe.whole ? probe.whole->size() : std::min<uint64_t>(probe.size, 1));
  if (probe.whole) {  // the server ignores Range: serve reads from the one full download
    auto holder = std::make_shared<const std::string>(std::move(*probe.whole));
    impl->data = reinterpret_cast<const std::byte*>(holder->data());
    impl->owner = holder;
  }
  return WeightSource(std::move(impl));
}

Result<WeightSource> WeightSource::directory(const std::filesystem::path& path) {
  GANTRY_ASSIGN_OR_RETURN(auto type, file_type_of(path));
  if (type != std::filesystem::file_type::directory)
    return InvalidArgument(path.string() + ": " + std::string(file_type_name(type)) + ", not a directory");
  auto impl = std::make_shared<Impl>();
  impl->kind = Kind::kDirectory;
  impl->label = path.string();
  impl->path = path;
  return WeightSource(std::move(impl));
}

Result<WeightSource> WeightSource::open(std::string_view spec, const HttpOptions& options) {
  if (is_url(spec) || is_hub_file(spec)) return url(std::string(spec), options);
  if (spec.find("://") != std::string_view::npos)
    return InvalidArgument(std::string(spec) + ": only http://, https:// and hf:// URLs are supported");
  const std::filesystem::path path(spec);
  GANTRY_ASSIGN_OR_RETURN(auto type, file_type_of(path));
  if (type == std::filesystem::file_type::directory) return directory(path);
  return file(path);
}

WeightSource::Kind WeightSource::kind() const { return impl_->kind; }
const std::string& WeightSource::label() const { return impl_->label; }
uint64_t WeightSource::size() const { return impl_->size; }
const std::filesystem::path& WeightSource::path() const { return impl_->path; }
const std::string& WeightSource::url_string() const { return impl_->url; }
const HttpOptions& WeightSource::http_options() const { return impl_->http; }
const std::byte* WeightSource::mapped() const { return impl_->data; }
uint64_t WeightSource::total_bytes_read() { return g_bytes_read.load(std::memory_order_relaxed); }

Result<Bytes> WeightSource::read(uint64_t offset, uint64_t n) const {
  if (impl_->kind == Kind::kDirectory) return InvalidArgument(impl_->label + ": a directory has no bytes");
  if (offset > impl_->size || n > impl_->size - offset)
    return InvalidArgument(impl_->label + ": bytes " + std::to_string(offset) + "+" + std::to_string(n) +
                           " lie outside its " + std::to_string(impl_->size) + " bytes");
  count(n);
  if (impl_->data != nullptr || n == 0) {
    const std::byte* base = impl_->data != nullptr ? impl_->data + offset : nullptr;
    return Bytes{std::span<const std::byte>(base, n), impl_->owner};
  }
  GANTRY_ASSIGN_OR_RETURN(std::string body, http_get_range(impl_->url, offset, n, impl_->size, impl_->http));
  auto holder = std::make_shared<const std::string>(std::move(body));
  return Bytes{std::as_bytes(std::span(holder->data(), holder->size())), holder};
}

Status WeightSource::read_into(uint64_t offset, std::span<std::byte> dst) const {
  if (impl_->fd && impl_->size >= offset && dst.size() <= impl_->size - offset) {
    size_t done = 0;
    while (done < dst.size()) {
      const ssize_t n =
          ::pread(impl_->fd->get(), dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return IoError(impl_->label + ": read: " + std::strerror(errno));
      if (n == 0) return IoError(impl_->label + ": the file shrank while being read");
      done += static_cast<size_t>(n);
    }
    count(dst.size());
    return Status::Ok();
  }
  GANTRY_ASSIGN_OR_RETURN(Bytes b, read(offset, dst.size()));
  if (!dst.empty()) std::memcpy(dst.data(), b.data.data(), dst.size());
  return Status::Ok();
}

Status WeightSource::preload() const {
  if (impl_->kind != Kind::kFile || impl_->data == nullptr) return Status::Ok();
  void* addr = const_cast<std::byte*>(impl_->data);
  if (madvise(addr, impl_->size, MADV_WILLNEED) != 0)
    return IoError(impl_->label + ": madvise(WILLNEED): " + std::strerror(errno));
  if (impl_->fd) (void)::readahead(impl_->fd->get(), 0, impl_->size);  // best effort
  return Status::Ok();
}

}  // namespace gantry::weights
