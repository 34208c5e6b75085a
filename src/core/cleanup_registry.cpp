#include "gantry/core/cleanup_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace gantry {
namespace {

// One slot: state 0 free, 1 being filled, 2 registered. The handler reads only slots in state 2.
struct Slot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};

// The registry itself: the only process-wide state, reachable from the signal handler.
struct Registry {
  Slot slots[kCleanupSlots];
};

Registry& registry() {
  static Registry r;  // constructed before any registration; never destroyed while handlers may run
  return r;
}

// Removes the entry `name` inside the directory `dirfd` (or the path itself with AT_FDCWD), recursing into
// directories. Uses only openat/getdents64/unlinkat/close, all async-signal-safe system calls.
void remove_tree_at(int dirfd, const char* name, int depth) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) return;
  if (depth > 32) return;
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      struct Dirent64 {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->reclen;
      if (std::strcmp(d->name, ".") == 0 || std::strcmp(d->name, "..") == 0) continue;
      remove_tree_at(fd, d->name, depth + 1);
    }
  }
  ::close(fd);
  ::unlinkat(dirfd, name, AT_REMOVEDIR);
}

void on_signal(int sig) {
  const int saved = errno;
  run_cleanup_now();
  errno = saved;
  // Die of the same signal, as if no handler had been installed (the shell sees 128 + sig).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

int register_cleanup_path(const std::filesystem::path& path) {
  const std::string& s = path.native();
  if (s.empty() || s.size() >= PATH_MAX) return -1;
  auto& r = registry();
  for (size_t i = 0; i < kCleanupSlots; ++i) {
    int expected = 0;
    if (!r.slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(r.slots[i].path, s.c_str(), s.size() + 1);
    r.slots[i].state.store(2);
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_cleanup_path(int slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= kCleanupSlots) return;
  registry().slots[slot].state.store(0);
}

size_t registered_cleanup_paths() {
  size_t n = 0;
  for (const auto& s : registry().slots) n += s.state.load() == 2 ? 1 : 0;
  return n;
}

void run_cleanup_now() {
  for (auto& s : registry().slots) {
    int expected = 2;
    // Claim the slot so that two signals (or a signal during a destructor) never remove twice.
    if (!s.state.compare_exchange_strong(expected, 1)) continue;
    remove_tree_at(AT_FDCWD, s.path, 0);
    s.state.store(0);
  }
}

void install_cleanup_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    (void)registry();  // construct it before any handler can run
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // e.g. under nohup
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

}  // namespace gantry
