#include "gantry/hw/machine.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gantry::hw {
namespace {

class DiskMachine final : public Machine {
 public:
  DiskMachine(std::string root, EnvOverride env) : root_(std::move(root)), env_(std::move(env)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
    if (root_.empty()) root_ = "/";
  }

  Result<std::string> read_file(std::string_view path) const override {
    const std::string full = resolve(path);
    const int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error_for(errno, "cannot open", path);
    std::string out;
    char buf[16384];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        return error_for(err, "cannot read", path);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > (16u << 20)) break;  // no sysfs/procfs file we read is anywhere near this
    }
    ::close(fd);
    return out;
  }

  Result<std::vector<std::string>> list_dir(std::string_view path) const override {
    const std::string full = resolve(path);
    DIR* dir = ::opendir(full.c_str());
    if (dir == nullptr) return error_for(errno, "cannot list", path);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(dir)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names.emplace_back(e->d_name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  bool exists(std::string_view path) const override {
    struct stat st {};
    return ::stat(resolve(path).c_str(), &st) == 0;
  }

  std::optional<std::string> getenv(std::string_view name) const override {
    if (env_) {
      auto it = env_->find(std::string(name));
      if (it == env_->end()) return std::nullopt;
      return it->second;
    }
    const char* v = std::getenv(std::string(name).c_str());  // NOLINT(concurrency-mt-unsafe): read-only
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  }

  bool is_local_root() const override { return root_ == "/"; }
  std::string root() const override { return root_; }

 private:
  std::string resolve(std::string_view path) const {
    if (root_ == "/") return std::string(path);
    std::string full = root_;
    if (path.empty() || path.front() != '/') full += '/';
    full += path;
    return full;
  }

  Status error_for(int err, std::string_view what, std::string_view path) const {
    std::string msg = std::string(what) + " " + std::string(path);
    if (root_ != "/") msg += " (under sysroot " + root_ + ")";
    msg += ": ";
    msg += std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return NotFound(std::move(msg));
    return IoError(std::move(msg));
  }

  std::string root_;
  EnvOverride env_;
};

}  // namespace

std::unique_ptr<Machine> make_disk_machine(std::string root, EnvOverride env) {
  return std::make_unique<DiskMachine>(std::move(root), std::move(env));
}

}  // namespace gantry::hw
