// Pulls into a model repository (ollama_pull.h): the temporary file of a download, and what a killed
// download leaves behind.
#include "server/ollama_pull.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "gantry/model/sha256.h"

namespace gantry::server {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("gantry_pull_" + std::to_string(::getpid()) + "_" +
                                               std::to_string(reinterpret_cast<uintptr_t>(this)));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// The id of a process that has exited (and been reaped).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

void write_file(const fs::path& p, std::string_view bytes) { std::ofstream(p, std::ios::binary) << bytes; }

TEST(OllamaPull, StalePartialsOfDeadProcessesAreRemovedLiveOnesKept) {
  TempDir d;
  const std::string dead = std::to_string(dead_pid());
  const fs::path stale = d.path / (".m.gguf.partial-" + dead + "-0");
  const fs::path mine = d.path / (".m.gguf.partial-" + std::to_string(::getpid()) + "-0");
  const fs::path init = d.path / ".m.gguf.partial-1-0";  // pid 1 lives (or is someone else's: kept)
  // A writer of another PID namespace: its id means nothing here, but it holds the file's lock.
  const fs::path locked = d.path / (".n.gguf.partial-" + dead + "-1");
  const fs::path model = d.path / "m.gguf";
  const fs::path not_partial = d.path / (".notes-" + dead + "-0");
  for (const auto& p : {stale, mine, init, locked, model, not_partial}) write_file(p, "GGUF");
  const int fd = ::open(locked.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);

  auto removed = remove_stale_partials(d.path);
  ::close(fd);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], stale);
  EXPECT_FALSE(fs::exists(stale));
  for (const auto& p : {mine, init, locked, model, not_partial}) EXPECT_TRUE(fs::exists(p)) << p;
  // Once its writer is gone (the lock released), the other namespace's file is stale too.
  removed = remove_stale_partials(d.path);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], locked);
}

TEST(OllamaPull, APullLeavesOnlyTheModelAndHoldsItsPartialLockedWhileWriting) {
  TempDir src, repo;
  std::string blob = "GGUF";
  blob.append(10 << 20, 'x');  // more than one 4 MiB chunk: progress comes while the partial exists
  const std::string hex = model::sha256_hex(blob);
  fs::create_directories(src.path / "blobs");
  write_file(src.path / "blobs" / ("sha256-" + hex), blob);
  const fs::path manifest = src.path / "manifests/registry.ollama.ai/library/tiny/latest";
  fs::create_directories(manifest.parent_path());
  write_file(manifest, R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" +
                           hex + R"(","size":)" + std::to_string(blob.size()) + "}]}");
  auto path = ollama::parse_model_path("tiny");
  ASSERT_TRUE(path.ok());
  int checked = 0;
  auto progress = [&](std::string line) {
    if (line.find("\"completed\"") == std::string::npos || line.find("\"completed\":0") != std::string::npos)
      return true;
    // Mid-download: the partial is there, hidden, and a cleaner (this process's own id aside) cannot
    // take its lock.
    for (const auto& e : fs::directory_iterator(repo.path)) {
      const std::string name = e.path().filename().string();
      if (name.find(".partial-") == std::string::npos) continue;
      EXPECT_TRUE(name.starts_with(".tiny.gguf.partial-" + std::to_string(::getpid()) + "-")) << name;
      const int fd = ::open(e.path().c_str(), O_RDONLY);
      EXPECT_GE(fd, 0);
      EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0) << "the writer holds the lock";
      ::close(fd);
      ++checked;
    }
    return true;
  };
  auto file = pull_model(src.path.string(), *path, repo.path, progress);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(*file, repo.path / "tiny.gguf");
  EXPECT_GT(checked, 0);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(repo.path)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"tiny.gguf"});
  EXPECT_EQ(fs::file_size(*file), blob.size());
}

}  // namespace
}  // namespace gantry::server
