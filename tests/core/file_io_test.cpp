// The file primitives every reader and writer of untrusted paths goes through.
#include "gantry/core/file_io.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/temp_dir.h"
#include "gantry/core/cleanup_registry.h"

namespace gantry {
namespace {

namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  fs::path p(const std::string& rel) const { return dir_.path() / rel; }
  void put(const std::string& rel, const std::string& bytes) const {
    std::ofstream(p(rel), std::ios::binary) << bytes;
  }
  test_util::TempDir dir_;
};

TEST_F(FileIo, ReadsRegularFiles) {
  put("a", "hello");
  auto r = read_file(p("a"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, "hello");
  auto head = read_prefix(p("a"), 3);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, "hel");
  EXPECT_EQ(read_prefix(p("a"), 100).value(), "hello");
}

TEST_F(FileIo, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(p("f").c_str(), 0600), 0);
  // No writer ever opens it: an open() for reading would block here for good, so returning at all (with
  // the refusal) is the proof; no clock needed.
  auto r = read_file(p("f"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), p("f").string() + ": is a FIFO, not a regular file");
  EXPECT_FALSE(read_prefix(p("f"), 4).ok());
  EXPECT_FALSE(read_file(p("f"), ReadOptions{.allow_char_device = true}).ok());
}

TEST_F(FileIo, DirectorySocketAndDevicesAreNamed) {
  fs::create_directories(p("d"));
  auto d = read_file(p("d"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("is a directory, not a regular file"), std::string::npos)
      << d.status().message();

  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = p("s").string();
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto so = read_file(p("s"));
  ::close(s);
  ASSERT_FALSE(so.ok());
  // A socket cannot be open()ed at all (ENXIO); either way the message names the file.
  EXPECT_NE(so.status().message().find(sock), std::string::npos) << so.status().message();

  auto dev = read_file("/dev/zero", ReadOptions{.max_bytes = 10});
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().message(), "/dev/zero: is a character device, not a regular file");
  // Where a device is the point, it may be read; the byte limit still holds (/dev/zero never ends).
  auto zero = read_file("/dev/zero", ReadOptions{.max_bytes = 10, .allow_char_device = true});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("more than the limit of 10 bytes"), std::string::npos);
  auto null = read_file("/dev/null", ReadOptions{.allow_char_device = true});
  ASSERT_TRUE(null.ok());
  EXPECT_EQ(*null, "");
}

TEST_F(FileIo, SizeLimitMissingFilesAndSymlinks) {
  put("big", std::string(100, 'x'));
  auto big = read_file(p("big"), 99);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("100 bytes exceeds the limit of 99"), std::string::npos);
  EXPECT_TRUE(read_file(p("big"), 100).ok());

  auto missing = read_file(p("nope"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), p("nope").string() + ": no such file");

  fs::create_symlink("big", p("link"));
  EXPECT_TRUE(read_file(p("link")).ok());
  auto nofollow = read_file(p("link"), ReadOptions{.no_follow = true});
  ASSERT_FALSE(nofollow.ok());
  EXPECT_NE(nofollow.status().message().find("is a symbolic link"), std::string::npos);

  fs::create_symlink("loop", p("loop"));
  auto loop = read_file(p("loop"));
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.status().message().find("too many levels of symbolic links"), std::string::npos);
  auto type = file_type_of(p("loop"));
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find(p("loop").string() + ": too many levels of symbolic links"),
            std::string::npos)
      << type.status().message();
  EXPECT_EQ(file_type_of(p("nope")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(file_type_of(p("big")).value(), fs::file_type::regular);
}

// ---- Writes: AtomicFile, write_file, copy_file, the signal cleanup registry ----

TEST_F(FileIo, WriteReplacesASymlinkInsteadOfWritingThroughIt) {
  put("victim", "precious");
  fs::create_symlink("victim", p("out.npy"));
  // The old fixed temporary name, planted as a symlink, must not matter either.
  fs::create_symlink("victim", p("out.npy.tmp"));
  ASSERT_TRUE(write_file(p("out.npy"), "new").ok());
  EXPECT_EQ(read_file(p("victim")).value(), "precious");
  EXPECT_FALSE(fs::is_symlink(p("out.npy")));
  EXPECT_EQ(read_file(p("out.npy")).value(), "new");
  EXPECT_TRUE(fs::is_symlink(p("out.npy.tmp")));  // left alone, not followed
  // Only the target appeared: no temporary file is left behind.
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_.path())) ++n;
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(registered_cleanup_paths(), 0u);
}

TEST_F(FileIo, ConcurrentWritersToOneDirectoryAllSucceed) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i)
        if (!write_file(p("same.npy"), std::string(1000, static_cast<char>('a' + t))).ok()) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const std::string last = read_file(p("same.npy")).value();
  EXPECT_EQ(last.size(), 1000u);
  EXPECT_EQ(last, std::string(1000, last[0]));  // one writer's whole content, never a mix
}

TEST_F(FileIo, WriteErrorsCarryTheRealCause) {
  auto s = write_file(p("no/such/dir/x"), "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(p("no/such/dir/x").string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  fs::create_directories(p("d/sub"));
  auto over_dir = write_file(p("d"), "x");  // renaming a file over a non-empty directory
  ASSERT_FALSE(over_dir.ok());
  EXPECT_NE(over_dir.message().find("cannot replace: Is a directory"), std::string::npos)
      << over_dir.message();
  EXPECT_EQ(std::distance(fs::directory_iterator(p("d")), fs::directory_iterator()), 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_.path()), fs::directory_iterator()), 1);
}

TEST_F(FileIo, AtomicFileDroppedLeavesNothing) {
  put("t", "old");
  {
    auto f = AtomicFile::create(p("t"));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->write("half").ok());
    EXPECT_TRUE(fs::exists(f->temp_path()));
    EXPECT_EQ(f->temp_path().parent_path(), dir_.path());
    EXPECT_EQ(registered_cleanup_paths(), 1u);
  }
  EXPECT_EQ(read_file(p("t")).value(), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_.path()), fs::directory_iterator()), 1);
  EXPECT_EQ(registered_cleanup_paths(), 0u);
}

TEST_F(FileIo, CopyRegularFileRefusesSpecialSources) {
  put("src", "abc");
  fs::create_symlink("src", p("dst"));
  ASSERT_TRUE(copy_regular_file(p("src"), p("dst")).ok());
  EXPECT_FALSE(fs::is_symlink(p("dst")));
  EXPECT_EQ(read_file(p("dst")).value(), "abc");
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0600), 0);
  auto s = copy_regular_file(p("fifo"), p("dst2"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is a FIFO"), std::string::npos);
  EXPECT_FALSE(fs::exists(p("dst2")));
}

TEST_F(FileIo, CreateNewFileNeverOpensAnExistingPath) {
  put("victim", "precious");
  fs::create_symlink("victim", p("planted"));
  auto r = create_new_file(p("planted"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("already exists"), std::string::npos);
  EXPECT_EQ(read_file(p("victim")).value(), "precious");
  EXPECT_TRUE(create_new_file(p("fresh")).ok());
}

// A process killed by SIGTERM removes its registered temporaries (files and whole directories).
TEST_F(FileIo, SignalRemovesRegisteredPaths) {
  fs::create_directories(p("extract/a/b"));
  put("extract/a/b/big", std::string(1 << 16, 'x'));
  put("extract/top", "y");
  put("partial.tmp", "z");
  put("keep", "k");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_cleanup_signal_handlers();
    register_cleanup_path(p("extract"));
    register_cleanup_path(p("partial.tmp"));
    ::raise(SIGTERM);
    ::_exit(0);  // not reached: the handler re-raises with the default action
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(p("extract")));
  EXPECT_FALSE(fs::exists(p("partial.tmp")));
  EXPECT_TRUE(fs::exists(p("keep")));
}

TEST(SafeFileName, VisibleAndInsideTheDirectory) {
  EXPECT_EQ(safe_file_name("logits"), "logits");
  EXPECT_EQ(safe_file_name("../../x"), "_._.._x");
  EXPECT_EQ(safe_file_name(".hidden"), "_hidden");
  EXPECT_EQ(safe_file_name(".."), "_.");
  EXPECT_EQ(safe_file_name("."), "_");
  EXPECT_EQ(safe_file_name("a/b\\c:d"), "a_b_c_d");
  EXPECT_EQ(safe_file_name(""), "output");
  EXPECT_EQ(safe_file_name(std::string(1000, 'a')).size(), 200u);
  EXPECT_EQ(safe_file_name("模型"), "______");
  EXPECT_EQ(safe_file_name(std::string("a\0b", 3)), "a_b");
}

}  // namespace
}  // namespace gantry
