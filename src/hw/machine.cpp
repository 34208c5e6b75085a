#include "gantry/hw/machine.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gantry/core/file_io.h"

namespace gantry::hw {
namespace {

class DiskMachine final : public Machine {
 public:
  DiskMachine(std::string root, EnvOverride env) : root_(std::move(root)), env_(std::move(env)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
    if (root_.empty()) root_ = "/";
  }

  // Through the one reader of untrusted paths: a FIFO or socket planted under --sysroot is refused rather
  // than blocking the probe; character devices are allowed (sysfs/procfs files are regular in practice).
  Result<std::string> read_file(std::string_view path) const override {
    const std::string full = resolve(path);
    auto r = gantry::read_file(full, ReadOptions{.max_bytes = 16u << 20, .allow_char_device = true});
    if (r.ok() || root_ == "/") return r;
    return Status(r.status().code(), r.status().message() + " (under sysroot " + root_ + ")");
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

  Result<std::string> read_link(std::string_view path) const override {
    char buf[4096];
    const ssize_t n = ::readlink(resolve(path).c_str(), buf, sizeof buf - 1);
    if (n < 0) return error_for(errno == EINVAL ? ENOENT : errno, "cannot read link", path);
    return std::string(buf, static_cast<size_t>(n));
  }

  Result<std::pair<unsigned, unsigned>> device_of(std::string_view path) const override {
    // A captured tree's files live on this computer's disks: their device numbers describe nothing.
    if (root_ != "/") return Unavailable("a captured machine (sysroot " + root_ + ") has no device numbers");
    struct stat st {};
    if (::stat(resolve(path).c_str(), &st) != 0) return error_for(errno, "cannot stat", path);
    return std::pair<unsigned, unsigned>(major(st.st_dev), minor(st.st_dev));
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

Result<std::string> Machine::read_link(std::string_view path) const {
  return NotFound("no symbolic links on this machine description: " + std::string(path));
}

Result<std::pair<unsigned, unsigned>> Machine::device_of(std::string_view path) const {
  return Unavailable("this machine description cannot stat " + std::string(path));
}

std::unique_ptr<Machine> make_disk_machine(std::string root, EnvOverride env) {
  return std::make_unique<DiskMachine>(std::move(root), std::move(env));
}

}  // namespace gantry::hw
