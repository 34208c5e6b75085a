// Hostile files, tried as an attacker would (issue 13): the real CLI on FIFOs, planted symlinks, sparse
// archives, huge manifests and odd names. Every case must end in bounded time with exit code 1 or 2 (never
// a signal), a message naming the file and the problem, and nothing changed outside the destination.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_run.h"
#include "core/temp_dir.h"
#include "gantry/core/npy.h"
#include "gantry/core/tensor.h"
#include "gantry/model/tensor_proto.h"

namespace {

namespace fs = std::filesystem;

const fs::path kGantry = fs::path(GANTRY_BINARY_DIR) / "bin" / "gantry";
const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";
const fs::path kMlp = kModels / "mlp_64_128_10.onnx";

struct Run {
  int code = -1;  // the exit status, or 128 + the signal that ended it
  std::string out;
  std::string err;
  bool timed_out = false;  // killed at the deadline: it hung (on a FIFO, a device, ...)
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs gantry with a hard kill after 30 s, so that a regression to "hangs forever" fails instead of
// stalling the suite. `env`: one extra "NAME=VALUE" for the child.
Run gantry(const std::vector<std::string>& args, const std::string& env = "") {
  std::vector<std::string> e{"GANTRY_LOG_LEVEL=off"};
  if (!env.empty()) e.push_back(env);
  const gantry::testing::CliResult c = gantry::testing::run_gantry(args, std::chrono::seconds(30), e);
  return {c.signal ? 128 + c.signal : c.exit_code, c.out, c.err, c.timed_out};
}

// Every file under `dir` (relative path -> size and content), to prove nothing changed.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const auto st = it->symlink_status();
    std::string what;
    if (fs::is_symlink(st))
      what = "-> " + fs::read_symlink(it->path()).string();
    else if (fs::is_regular_file(st))
      what = slurp(it->path());
    else
      what = "type " + std::to_string(static_cast<int>(st.type()));
    files[fs::relative(it->path(), dir).string()] = what;
  }
  return files;
}

// The contract every hostile case shares: a clean failure (1 or 2), not a hang, naming `file` and `problem`.
void expect_clean_failure(const Run& r, const std::string& file, const std::string& problem) {
  EXPECT_TRUE(r.code == 1 || r.code == 2)
      << "exit code " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_FALSE(r.timed_out) << "waited until killed";
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find(file), std::string::npos) << "message does not name " << file << ":\n" << all;
  EXPECT_NE(all.find(problem), std::string::npos) << "message does not say '" << problem << "':\n" << all;
}

void make_fifo(const fs::path& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p; }

gantry::Tensor mlp_input() {
  auto x = gantry::Tensor::allocate(gantry::DType::kFloat32, gantry::Shape({3, 64})).value();
  for (size_t i = 0; i < 192; ++i) x.values<float>()[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
  return x;
}

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kGantry)) FAIL() << kGantry << " not built";
    if (!fs::exists(kMlp)) FAIL() << kMlp << " missing: run 'make setup'";
  }
  fs::path p(const std::string& rel) const { return dir_.path() / rel; }
  gantry::test_util::TempDir dir_;
};

// ---- Class 4: special files must not hang any reader ----

TEST_F(HostileFiles, FifoAsRunInputIsRefused) {
  make_fifo(p("x.npy"));
  const auto before = snapshot(dir_.path());
  auto r = gantry({"run", kMlp.string(), "--provider", "cpu", "-i", "input=" + p("x.npy").string()});
  expect_clean_failure(r, p("x.npy").string(), "is a FIFO, not a regular file");
  EXPECT_EQ(snapshot(dir_.path()), before);
}

TEST_F(HostileFiles, FifoAsManifestIsRefused) {
  fs::create_directories(p("pkg"));
  fs::copy_file(kMlp, p("pkg/m.onnx"));
  make_fifo(p("pkg/gantry.json"));
  const auto before = snapshot(dir_.path());
  for (const char* cmd : {"inspect", "run"}) {
    auto r = gantry({cmd, p("pkg").string()});
    expect_clean_failure(r, "gantry.json", "is a FIFO, not a regular file");
  }
  // pack reads a gantry.json already in the source directory too.
  auto r = gantry({"pack", p("pkg").string(), "-o", p("out").string()});
  expect_clean_failure(r, "gantry.json", "is a FIFO, not a regular file");
  EXPECT_FALSE(fs::exists(p("out/m.onnx")));
  fs::remove_all(p("out"));
  EXPECT_EQ(snapshot(dir_.path()), before);
}

TEST_F(HostileFiles, FifoAsTestOnnxTensorIsRefused) {
  const fs::path set = p("t/test_data_set_0");
  fs::create_directories(set);
  fs::copy_file(kMlp, p("t/model.onnx"));
  make_fifo(set / "input_0.pb");
  ASSERT_TRUE(gantry::model::write_tensor_proto(set / "output_0.pb", mlp_input(), "logits").ok());
  auto r = gantry({"test-onnx", p("t").string()});
  EXPECT_FALSE(r.timed_out) << "waited until killed";
  EXPECT_NE(r.out.find("input_0.pb: is a FIFO, not a regular file"), std::string::npos) << r.out;
}

TEST_F(HostileFiles, FifoAsModelIsRefused) {
  make_fifo(p("m.onnx"));
  for (const char* cmd : {"inspect", "run"}) {
    auto r = gantry({cmd, p("m.onnx").string()});
    expect_clean_failure(r, p("m.onnx").string(), "not a regular file");
  }
}

TEST_F(HostileFiles, FifoUnderSysrootIsReportedNotWaitedOn) {
  const fs::path root = p("root");
  fs::copy(fs::path(GANTRY_SOURCE_DIR) / "tests/fixtures/hw/container-cgroup2", root,
           fs::copy_options::recursive);
  ASSERT_TRUE(fs::exists(root / "proc/meminfo"));
  fs::remove(root / "proc/meminfo");
  make_fifo(root / "proc/meminfo");
  auto r = gantry({"detect", "--sysroot", root.string()});
  EXPECT_FALSE(r.timed_out) << "waited until killed";
  EXPECT_LT(r.code, 128) << r.err;
  EXPECT_NE((r.out + r.err).find("is a FIFO, not a regular file"), std::string::npos) << r.out << r.err;
}

// ---- Class 5: the write path never follows planted symlinks and never collides ----

TEST_F(HostileFiles, RunOutputsReplacePlantedSymlinks) {
  ASSERT_TRUE(gantry::write_npy(p("x.npy"), mlp_input()).ok());
  { std::ofstream(p("victim")) << "precious"; }
  fs::create_directories(p("d"));
  fs::create_symlink("../victim", p("d/logits.npy.tmp"));  // the old fixed temporary name
  auto r = gantry({"run", kMlp.string(), "--provider", "cpu", "-i", "input=" + p("x.npy").string(), "-o",
                   p("d").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(p("victim")), "precious");
  EXPECT_TRUE(fs::is_symlink(p("d/logits.npy.tmp")));
  EXPECT_TRUE(gantry::read_npy(p("d/logits.npy")).ok());

  fs::remove(p("d/logits.npy"));
  fs::create_symlink("../victim", p("d/logits.npy"));  // the target itself
  r = gantry({"run", kMlp.string(), "--provider", "cpu", "-i", "input=" + p("x.npy").string(), "-o",
              p("d").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(p("victim")), "precious");
  EXPECT_FALSE(fs::is_symlink(p("d/logits.npy")));
  EXPECT_TRUE(gantry::read_npy(p("d/logits.npy")).ok());
  EXPECT_EQ(std::distance(fs::directory_iterator(p("d")), fs::directory_iterator()), 2);  // no temporaries
}

TEST_F(HostileFiles, PackTarIgnoresPlantedPartialFile) {
  { std::ofstream(p("victim")) << "precious"; }
  fs::create_directories(p("o"));
  fs::create_symlink("../victim", p("o/out.tar.partial"));
  auto r = gantry({"pack", kMlp.string(), "-o", p("o/out.tar").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(p("victim")), "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p("o/out.tar"))));
  auto i = gantry({"inspect", p("o/out.tar").string()});
  EXPECT_EQ(i.code, 0) << i.err;

  // --force over a symlink replaces the link, not what it points to.
  fs::remove(p("o/out.tar"));
  fs::create_symlink("../victim", p("o/out.tar"));
  r = gantry({"pack", kMlp.string(), "-o", p("o/out.tar").string(), "--force"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(p("victim")), "precious");
  EXPECT_FALSE(fs::is_symlink(p("o/out.tar")));

  // A package directory: planted symlinks at the files it writes are replaced as well.
  fs::create_directories(p("pkg"));
  fs::create_symlink("../victim", p("pkg/mlp_64_128_10.onnx"));
  fs::create_symlink("../victim", p("pkg/gantry.json"));
  r = gantry({"pack", kMlp.string(), "-o", p("pkg").string(), "--force"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(p("victim")), "precious");
  EXPECT_FALSE(fs::is_symlink(p("pkg/gantry.json")));
  EXPECT_FALSE(fs::is_symlink(p("pkg/mlp_64_128_10.onnx")));
}

TEST_F(HostileFiles, EightConcurrentRunsIntoOneDirectoryAllSucceed) {
  ASSERT_TRUE(gantry::write_npy(p("x.npy"), mlp_input()).ok());
  fs::create_directories(p("d"));
  std::string cmd;
  for (int i = 0; i < 8; ++i)
    cmd += "( GANTRY_LOG_LEVEL=off timeout -s KILL 60 " + quote(kGantry.string()) + " run " +
           quote(kMlp.string()) + " --provider cpu --threads 1 -i input=" + quote(p("x.npy").string()) +
           " -o " + quote(p("d").string()) + " >/dev/null 2>" + quote(p("err" + std::to_string(i)).string()) +
           "; echo $? >" + quote(p("rc" + std::to_string(i)).string()) + " ) & ";
  cmd += "wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(slurp(p("rc" + std::to_string(i))), "0\n") << slurp(p("err" + std::to_string(i)));
  }
  EXPECT_TRUE(gantry::read_npy(p("d/logits.npy")).ok());
  EXPECT_EQ(std::distance(fs::directory_iterator(p("d")), fs::directory_iterator()), 1);
}

// ---- Class 6: a sparse tar must not expand into gigabytes ----

TEST_F(HostileFiles, SparseTarIsRefusedBeforeExpanding) {
  ASSERT_EQ(std::system("tar --version >/dev/null 2>&1"), 0) << "GNU tar is not installed";
  ASSERT_EQ(gantry({"pack", kMlp.string(), "-o", p("pkg").string()}).code, 0);
  { std::ofstream hole(p("pkg/hole.bin")); }
  fs::resize_file(p("pkg/hole.bin"), 3ull << 30);  // 3 GB of holes, no data blocks
  const std::string tar = "cd " + quote(p("pkg").string()) + " && tar --sparse -cf " +
                          quote(p("x.tar").string()) + " gantry.json mlp_64_128_10.onnx hole.bin";
  ASSERT_EQ(std::system(tar.c_str()), 0);
  fs::remove(p("pkg/hole.bin"));
  ASSERT_LT(fs::file_size(p("x.tar")), 1u << 20);
  fs::create_directories(p("tmp"));
  auto r = gantry({"inspect", p("x.tar").string()}, "TMPDIR=" + p("tmp").string());
  expect_clean_failure(r, "hole.bin", "is a sparse file");
  EXPECT_TRUE(fs::is_empty(p("tmp"))) << "the extraction directory was left behind";
}

// ---- Class 7: manifests: duplicate keys, size, symlinks out of the package ----

TEST_F(HostileFiles, ManifestSymlinkLeavingThePackageIsRefused) {
  ASSERT_EQ(gantry({"pack", kMlp.string(), "-o", p("pkg").string()}).code, 0);
  fs::rename(p("pkg/gantry.json"), p("outside.json"));
  fs::create_symlink("../outside.json", p("pkg/gantry.json"));
  const auto before = snapshot(dir_.path());
  for (const char* cmd : {"inspect", "run"}) {
    auto r = gantry({cmd, p("pkg").string()});
    expect_clean_failure(r, "gantry.json", "outside the package directory");
  }
  EXPECT_EQ(snapshot(dir_.path()), before);
}

TEST_F(HostileFiles, ManifestDuplicateKeyIsNamed) {
  ASSERT_EQ(gantry({"pack", kMlp.string(), "-o", p("pkg").string()}).code, 0);
  std::string text = slurp(p("pkg/gantry.json"));
  text.insert(text.find('{') + 1, "\"model_file\": \"../../etc/passwd\",");
  { std::ofstream(p("pkg/gantry.json"), std::ios::binary) << text; }
  auto r = gantry({"inspect", p("pkg").string()});
  expect_clean_failure(r, "gantry.json", "duplicate key 'model_file'");
}

// ---- Class 8: numbers, broken expected outputs, output names, symlink loops, non-ASCII names ----

void make_test_set(const fs::path& dir) {
  fs::create_directories(dir / "test_data_set_0");
  fs::copy_file(kMlp, dir / "model.onnx");
  ASSERT_TRUE(
      gantry::model::write_tensor_proto(dir / "test_data_set_0/input_0.pb", mlp_input(), "input").ok());
}

TEST_F(HostileFiles, TestOnnxHugeIndexIsAClearFailure) {
  make_test_set(p("t"));
  fs::rename(p("t/test_data_set_0/input_0.pb"), p("t/test_data_set_0/input_99999999999999999999.pb"));
  auto r = gantry({"test-onnx", p("t").string()});
  expect_clean_failure(r, "input_99999999999999999999.pb", "is out of range");
  EXPECT_NE(r.out.find("FAIL t"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("stoi"), std::string::npos) << r.err;
}

TEST_F(HostileFiles, TestOnnxBrokenExpectedOutputFails) {
  make_test_set(p("t"));
  for (const std::string& bytes : {std::string(), std::string("\xff\xff\xff garbage")}) {
    { std::ofstream(p("t/test_data_set_0/output_0.pb"), std::ios::binary) << bytes; }
    auto r = gantry({"test-onnx", p("t").string()});
    expect_clean_failure(r, "output_0.pb", "expected output");
    EXPECT_NE(r.out.find("FAIL t"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("0 passed, 1 failed, 0 skipped"), std::string::npos) << r.out;
  }
}

TEST_F(HostileFiles, OutputNamesBecomeSafeVisibleFiles) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("names");
  const std::vector<std::string> outs = {"../../x", ".hidden", "..", "a/b"};
  for (const auto& o : outs) {
    auto* n = g->add_node();
    n->set_op_type("Identity");
    n->add_input("x");
    n->add_output(o);
  }
  std::vector<std::string> io = {"x"};
  io.insert(io.end(), outs.begin(), outs.end());
  for (const auto& name : io) {
    auto* v = name == "x" ? g->add_input() : g->add_output();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(2);
  }
  { std::ofstream(p("names.onnx"), std::ios::binary) << m.SerializeAsString(); }
  auto x = gantry::Tensor::allocate(gantry::DType::kFloat32, gantry::Shape({2})).value();
  ASSERT_TRUE(gantry::write_npy(p("x.npy"), x).ok());
  fs::create_directories(p("a/b/d"));
  const auto before = snapshot(dir_.path());
  auto r = gantry({"run", p("names.onnx").string(), "--provider", "cpu", "-i", "x=" + p("x.npy").string(),
                   "-o", p("a/b/d").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> written;
  for (const auto& e : fs::directory_iterator(p("a/b/d"))) written.insert(e.path().filename().string());
  EXPECT_EQ(written, (std::set<std::string>{"_._.._x.npy", "_hidden.npy", "_..npy", "a_b.npy"}));
  auto after = snapshot(dir_.path());
  for (const auto& f : written) after.erase("a/b/d/" + f);
  EXPECT_EQ(after, before);  // nothing outside the destination (no ../../x.npy, no hidden file)
}

TEST_F(HostileFiles, SymlinkLoopIsAStatusNotAnException) {
  fs::create_symlink("loop", p("loop"));
  for (const char* cmd : {"inspect", "run"}) {
    auto r = gantry({cmd, p("loop").string()});
    expect_clean_failure(r, p("loop").string(), "too many levels of symbolic links");
    EXPECT_EQ((r.out + r.err).find("filesystem error"), std::string::npos) << r.err;
  }
  auto t = gantry({"test-onnx", p("loop").string()});
  expect_clean_failure(t, p("loop").string(), "too many levels of symbolic links");
  fs::create_directories(p("src"));
  fs::copy_file(kMlp, p("src/m.onnx"));
  fs::create_symlink("loop2", p("src/loop2"));
  auto pk = gantry({"pack", p("src").string(), "-o", p("out").string()});
  expect_clean_failure(pk, "loop2", "levels of symbolic links");
  EXPECT_EQ((pk.out + pk.err).find("filesystem error"), std::string::npos) << pk.err;
  fs::remove(p("src/loop2"));
  fs::create_symlink("gantry.json", p("src/gantry.json"));
  pk = gantry({"pack", p("src").string(), "-o", p("out").string()});
  expect_clean_failure(pk, "gantry.json", "levels of symbolic links");
}

TEST_F(HostileFiles, NonAsciiFileNamesPackIntoATar) {
  const std::string name = "mlp ünï cødé 模型.onnx";
  fs::copy_file(kMlp, p(name));
  auto r = gantry({"pack", p(name).string(), "-o", p("out.tar").string()}, "LC_ALL=C");
  ASSERT_EQ(r.code, 0) << r.err;
  auto i = gantry({"inspect", p("out.tar").string()}, "LC_ALL=C");
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find(name), std::string::npos) << i.out;
}

}  // namespace
