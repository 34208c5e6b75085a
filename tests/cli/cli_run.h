// Runs build/bin/gantry as a child process and reports how it ended, for CLI tests that must prove a bad
// input ends in a clear error: the exit code (or the signal), stdout, stderr, wall time and peak RSS, with
// the child killed when it outlives a deadline (so a hang is a test failure, not a stuck suite) and when
// the test process dies first (so no child outlives its test).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gantry::testing {

// AddressSanitizer's shadow memory, redzones and quarantine add to a process's resident set: a peak-RSS
// bound on a child gantry (built the same way as this test) is scaled by kRssBoundFactor under it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr long kRssBoundFactor = 2;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr long kRssBoundFactor = 2;
#else
inline constexpr long kRssBoundFactor = 1;
#endif
#else
inline constexpr long kRssBoundFactor = 1;
#endif
inline constexpr long rss_bound_kib(long kib) { return kib * kRssBoundFactor; }

struct CliResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it (SIGKILL after the deadline)
  bool timed_out = false;
  std::string out, err;
  double seconds = 0;
  long max_rss_kib = 0;  // peak resident set of the child
  // For failure messages: how it ended and what it said.
  std::string describe() const {
    return "exit " + std::to_string(exit_code) + ", signal " + std::to_string(signal) +
           (timed_out ? " (timed out)" : "") + ", " + std::to_string(seconds) + " s, " +
           std::to_string(max_rss_kib / 1024) + " MiB\nstderr: " + err + "\nstdout: " + out.substr(0, 2000);
  }
};

inline std::string gantry_binary() { return std::string(GANTRY_BINARY_DIR) + "/bin/gantry"; }

// Runs `gantry args...` (no shell), stdin from /dev/null, killed after `deadline`; `env` adds "NAME=VALUE"
// entries to the child's environment.
inline CliResult run_gantry(const std::vector<std::string>& args,
                            std::chrono::milliseconds deadline = std::chrono::seconds(30),
                            const std::vector<std::string>& env = {}) {
  CliResult r;
  char out_tpl[] = "/tmp/gantry-cli-out-XXXXXX";
  char err_tpl[] = "/tmp/gantry-cli-err-XXXXXX";
  const int out_fd = ::mkstemp(out_tpl);
  const int err_fd = ::mkstemp(err_tpl);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Killed with the test: a test process that crashes or is killed must not leave gantry running.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    for (const auto& e : env) {
      const auto eq = e.find('=');
      if (eq != std::string::npos) ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    std::vector<std::string> argv_s{gantry_binary()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  // Wait for the child's exit itself (a pidfd becomes readable when it exits), at most until the deadline.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int ready = 0;
    for (auto left = deadline; (ready = ::poll(&p, 1, static_cast<int>(left.count()))) < 0 && errno == EINTR;)
      left = std::max(std::chrono::milliseconds(0),
                      deadline - std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - t0));
    ::close(pidfd);
    if (ready == 0) {
      ::kill(pid, SIGKILL);
      r.timed_out = true;
    }
  }
  // Reaped here: at once after the wait above (or after the kill); a kernel without pidfds blocks here.
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.max_rss_kib = usage.ru_maxrss;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  auto slurp = [](const char* path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  r.out = slurp(out_tpl);
  r.err = slurp(err_tpl);
  ::close(out_fd);
  ::close(err_fd);
  ::unlink(out_tpl);
  ::unlink(err_tpl);
  return r;
}

}  // namespace gantry::testing
