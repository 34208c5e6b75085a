// Starts tests/weights/http_server.py on 127.0.0.1 (an ephemeral port) for the URL source tests, and
// stops it with the test, on every exit path: the destructor kills it, and the kernel kills it when the
// test process dies first (a crash, ctest's timeout), so it never outlives the test holding ctest's output
// pipe open. Every wait is bounded.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace gantry::weights::testing {

class HttpServer {
 public:
  explicit HttpServer(const std::string& root) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::execl("/usr/bin/python3", "python3", GANTRY_SOURCE_DIR "/tests/weights/http_server.py", root.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    std::string line;
    pollfd p{fds[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && ::poll(&p, 1, 10'000) > 0) {
      char buf[64];
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (line.find('\n') != std::string::npos) port_ = std::stoi(line);
  }
  ~HttpServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // nothing to flush: the server holds no state worth a clean exit
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
    }
  }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  bool ok() const { return port_ > 0; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + path;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace gantry::weights::testing
