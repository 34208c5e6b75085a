// Packages: directory, tar and bare model files; checksums verified; paths that escape refused.
#include "gantry/model/package.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/temp_dir.h"
#include "gantry/core/file_io.h"
#include "gantry/model/sha256.h"
#include "gantry/model/tar.h"
#include "model/tiny_onnx.h"

namespace gantry::model {
namespace {

namespace fs = std::filesystem;

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.path() / "src" / "tiny.onnx";
    fs::create_directories(model_.parent_path());
    ASSERT_TRUE(write_file(model_, test_util::tiny_onnx_bytes()).ok());
  }
  fs::path p(const std::string& rel) const { return dir_.path() / rel; }

  test_util::TempDir dir_;
  fs::path model_;
};

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  test_util::TempDir dir;
  ASSERT_TRUE(write_file(dir.path() / "f", "abc").ok());
  EXPECT_EQ(*sha256_file(dir.path() / "f"), sha256_hex("abc"));
  EXPECT_EQ(sha256_file(dir.path() / "missing").status().code(), StatusCode::kNotFound);
}

TEST_F(PackageTest, BareOnnxGetsASynthesisedManifest) {
  auto pkg = load_package(model_);
  ASSERT_TRUE(pkg.ok()) << pkg.status().to_string();
  EXPECT_EQ(pkg->kind(), PackageKind::kBareModel);
  EXPECT_TRUE(pkg->synthesized_manifest());
  EXPECT_EQ(pkg->manifest().name, "tiny");
  EXPECT_EQ(pkg->manifest().format, ModelFormat::kOnnx);
  EXPECT_EQ(pkg->manifest().model_file, "tiny.onnx");
  EXPECT_EQ(pkg->model_sha256(), sha256_hex(test_util::tiny_onnx_bytes()));
  EXPECT_EQ(pkg->model_path(), fs::canonical(model_));
  EXPECT_TRUE(validate_manifest(pkg->manifest()).ok());
}

TEST_F(PackageTest, BareGgufRecognisedByMagic) {
  ASSERT_TRUE(write_file(p("m.bin"), std::string("GGUF\x03\x00\x00\x00", 8)).ok());
  auto f = detect_model_format(p("m.bin"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, ModelFormat::kGguf);
  ASSERT_TRUE(write_file(p("fake.gguf"), "not gguf at all").ok());
  auto bad = detect_model_format(p("fake.gguf"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GGUF"), std::string::npos);
  ASSERT_TRUE(write_file(p("x.txt"), "hello").ok());
  EXPECT_EQ(load_package(p("x.txt")).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(PackageTest, MissingAndEmptyInputsAreClearErrors) {
  auto missing = load_package(p("nope.onnx"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.onnx"), std::string::npos);
  ASSERT_TRUE(write_file(p("empty.onnx"), "").ok());
  auto empty = load_package(p("empty.onnx"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  fs::create_directories(p("no_manifest"));
  auto nomanifest = load_package(p("no_manifest"));
  ASSERT_FALSE(nomanifest.ok());
  EXPECT_NE(nomanifest.status().message().find("gantry.json"), std::string::npos);
}

TEST_F(PackageTest, PackToDirectoryThenLoad) {
  PackOptions o;
  o.version = "1.2.3";
  o.task = "identity";
  o.preferred_provider = "cpu";
  auto m = pack_package(model_, p("pkg"), o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(fs::exists(p("pkg/gantry.json")));
  EXPECT_TRUE(fs::exists(p("pkg/tiny.onnx")));
  ASSERT_TRUE(m->io) << "pack fills io from the ONNX graph";
  EXPECT_EQ(m->io->inputs[0].name, "x");
  EXPECT_EQ(m->io->inputs[0].dim_names[0], "batch");
  auto pkg = load_package(p("pkg"));
  ASSERT_TRUE(pkg.ok()) << pkg.status().to_string();
  EXPECT_EQ(pkg->kind(), PackageKind::kDirectory);
  EXPECT_FALSE(pkg->synthesized_manifest());
  EXPECT_EQ(pkg->manifest(), *m);
  EXPECT_EQ(pkg->manifest().version, "1.2.3");
  EXPECT_EQ(pkg->manifest().hardware_requirements.preferred_provider, "cpu");
  EXPECT_EQ(pkg->model_sha256(), sha256_hex(test_util::tiny_onnx_bytes()));
  // Packing again into a non-empty directory needs overwrite.
  auto again = pack_package(model_, p("pkg"), o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--force"), std::string::npos);
  o.overwrite = true;
  EXPECT_TRUE(pack_package(model_, p("pkg"), o).ok());
}

TEST_F(PackageTest, PackDirectoryWithExtraFilesToTarThenLoad) {
  fs::create_directories(p("src/vocab"));
  ASSERT_TRUE(write_file(p("src/vocab/labels.txt"), "cat\ndog\n").ok());
  auto m = pack_package(p("src"), p("out/model.tar"), {});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->sha256.size(), 2u);
  EXPECT_EQ(m->sha256.at("vocab/labels.txt"), sha256_hex("cat\ndog\n"));
  fs::path root;
  {
    auto pkg = load_package(p("out/model.tar"));
    ASSERT_TRUE(pkg.ok()) << pkg.status().to_string();
    EXPECT_EQ(pkg->kind(), PackageKind::kTar);
    EXPECT_EQ(pkg->manifest(), *m);
    root = pkg->root();
    EXPECT_TRUE(fs::exists(pkg->model_path()));
    EXPECT_TRUE(fs::exists(root / "vocab/labels.txt"));
    auto copy = *pkg;  // copies share the extraction directory
  }
  EXPECT_FALSE(fs::exists(root)) << "the extraction directory goes with the last Package";
}

TEST_F(PackageTest, PackRefusesAmbiguousOrMissingModels) {
  ASSERT_TRUE(write_file(p("src/second.onnx"), test_util::tiny_onnx_bytes()).ok());
  auto two = pack_package(p("src"), p("pkg"), {});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("--model-file"), std::string::npos);
  PackOptions o;
  o.model_file = "second.onnx";
  auto chosen = pack_package(p("src"), p("pkg"), o);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->model_file, "second.onnx");
  fs::create_directories(p("nomodel"));
  ASSERT_TRUE(write_file(p("nomodel/readme.txt"), "x").ok());
  EXPECT_EQ(pack_package(p("nomodel"), p("pkg2"), {}).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(pack_package(p("src"), p("src/inner"), {}).ok()) << "a package inside its own source";
  PackOptions badver;
  badver.version = "banana";
  auto bv = pack_package(model_, p("pkg3"), badver);
  ASSERT_FALSE(bv.ok());
  EXPECT_NE(bv.status().message().find("version"), std::string::npos);
  PackOptions badprov;
  badprov.preferred_provider = "quantum";
  EXPECT_FALSE(pack_package(model_, p("pkg4"), badprov).ok());
  ASSERT_TRUE(write_file(p("broken.onnx"), "\x08\x08garbage that is not a model").ok());
  auto broken = pack_package(p("broken.onnx"), p("pkg5"), {});
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("broken.onnx"), std::string::npos);
}

TEST_F(PackageTest, PackKeepsAnExistingManifestsFields) {
  ASSERT_TRUE(write_file(p("src/gantry.json"), R"({"name": "kept", "version": "2.0", "format": "onnx",
      "model_file": "tiny.onnx", "runtime": {"intra_op_threads": 1}})")
                  .ok());
  auto m = pack_package(p("src"), p("pkg"), {});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->name, "kept");
  EXPECT_EQ(m->version, "2.0");
  EXPECT_EQ(m->runtime.intra_op_threads, 1);
  EXPECT_EQ(m->sha256.count("gantry.json"), 0u);
}

TEST_F(PackageTest, ChecksumMismatchNamesTheFile) {
  ASSERT_TRUE(pack_package(model_, p("pkg"), {}).ok());
  std::string bytes = test_util::tiny_onnx_bytes();
  bytes.back() ^= 1;
  ASSERT_TRUE(write_file(p("pkg/tiny.onnx"), bytes).ok());
  auto pkg = load_package(p("pkg"));
  ASSERT_FALSE(pkg.ok());
  EXPECT_EQ(pkg.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(pkg.status().message().find("tiny.onnx: sha256 mismatch"), std::string::npos)
      << pkg.status().message();
  LoadOptions no_verify;
  no_verify.verify_checksums = false;
  EXPECT_TRUE(load_package(p("pkg"), no_verify).ok());
}

TEST_F(PackageTest, ManifestErrorsCarryThePackage) {
  ASSERT_TRUE(pack_package(model_, p("pkg"), {}).ok());
  auto j = nlohmann::json::parse(*read_file(p("pkg/gantry.json")));
  j["hardware_requirements"]["strategy"] = "nope";
  ASSERT_TRUE(write_file(p("pkg/gantry.json"), j.dump()).ok());
  auto pkg = load_package(p("pkg"));
  ASSERT_FALSE(pkg.ok());
  EXPECT_NE(pkg.status().message().find("hardware_requirements.strategy"), std::string::npos);
  EXPECT_NE(pkg.status().message().find("gantry.json"), std::string::npos);
}

TEST_F(PackageTest, PathsEscapingThePackageAreRefused) {
  ASSERT_TRUE(pack_package(model_, p("pkg"), {}).ok());
  auto base = nlohmann::json::parse(*read_file(p("pkg/gantry.json")));
  const std::string hash = base["sha256"]["tiny.onnx"];
  ASSERT_TRUE(write_file(p("outside.onnx"), test_util::tiny_onnx_bytes()).ok());

  // '..' and absolute paths are refused by the manifest parser.
  for (const std::string& path : std::vector<std::string>{"../outside.onnx", p("outside.onnx").string()}) {
    auto j = base;
    j["model_file"] = path;
    j["sha256"] = {{path, hash}};
    ASSERT_TRUE(write_file(p("pkg/gantry.json"), j.dump()).ok());
    auto pkg = load_package(p("pkg"));
    ASSERT_FALSE(pkg.ok()) << path;
    EXPECT_EQ(pkg.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(pkg.status().message().find(path), std::string::npos) << pkg.status().message();
  }
  // A symlink inside the package that points outside it.
  fs::create_symlink(p("outside.onnx"), p("pkg/link.onnx"));
  auto j = base;
  j["model_file"] = "link.onnx";
  j["sha256"] = {{"link.onnx", hash}};
  ASSERT_TRUE(write_file(p("pkg/gantry.json"), j.dump()).ok());
  auto pkg = load_package(p("pkg"));
  ASSERT_FALSE(pkg.ok());
  EXPECT_NE(pkg.status().message().find("outside the package directory"), std::string::npos)
      << pkg.status().message();
  // A symlink to a file inside the package is fine.
  fs::create_symlink("tiny.onnx", p("pkg/inner.onnx"));
  j["model_file"] = "inner.onnx";
  j["sha256"] = {{"inner.onnx", hash}};
  ASSERT_TRUE(write_file(p("pkg/gantry.json"), j.dump()).ok());
  EXPECT_TRUE(load_package(p("pkg")).ok());
  // A model file that is not in the package.
  j["model_file"] = "gone.onnx";
  j["sha256"] = {{"gone.onnx", hash}};
  ASSERT_TRUE(write_file(p("pkg/gantry.json"), j.dump()).ok());
  EXPECT_EQ(load_package(p("pkg")).status().code(), StatusCode::kNotFound);
}

TEST_F(PackageTest, FormatMustMatchTheFile) {
  ASSERT_TRUE(pack_package(model_, p("pkg"), {}).ok());
  auto j = nlohmann::json::parse(*read_file(p("pkg/gantry.json")));
  j["format"] = "gguf";
  ASSERT_TRUE(write_file(p("pkg/gantry.json"), j.dump()).ok());
  auto pkg = load_package(p("pkg"));
  ASSERT_FALSE(pkg.ok());
  EXPECT_NE(pkg.status().message().find("format"), std::string::npos);
}

// Tar archives made by Python's tarfile with hostile members: each refused before anything escapes.
TEST_F(PackageTest, HostileTarEntriesAreRefused) {
  if (std::system("/usr/bin/python3 -c 'import tarfile' >/dev/null 2>&1") != 0)
    FAIL() << "/usr/bin/python3 is not installed";
  const std::string script = R"PY(
import tarfile, io, sys, os
d = sys.argv[1]
def add(tf, name, data=b'x', kind=tarfile.REGTYPE, link=''):
    ti = tarfile.TarInfo(name); ti.type = kind; ti.linkname = link; ti.size = len(data) if kind == tarfile.REGTYPE else 0
    tf.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
for name, members in {
    'dotdot.tar': [('../escaped.txt', tarfile.REGTYPE, '')],
    'absolute.tar': [(os.path.join(d, 'abs_escaped.txt'), tarfile.REGTYPE, '')],
    'symlink.tar': [('link', tarfile.SYMTYPE, '/etc')],
    'hardlink.tar': [('hard', tarfile.LNKTYPE, '/etc/passwd')],
    'device.tar': [('dev', tarfile.CHRTYPE, '')],
}.items():
    with tarfile.open(os.path.join(d, name), 'w', format=tarfile.GNU_FORMAT) as tf:
        for m, kind, link in members:
            add(tf, m, kind=kind, link=link)
)PY";
  ASSERT_TRUE(write_file(p("mk.py"), script).ok());
  fs::create_directories(p("tars"));
  ASSERT_EQ(0, std::system(("/usr/bin/python3 " + p("mk.py").string() + " " + p("tars").string()).c_str()));
  for (const auto& [file, fragment] :
       std::vector<std::pair<std::string, std::string>>{{"dotdot.tar", "escapes the package directory"},
                                                        {"absolute.tar", "absolute path"},
                                                        {"symlink.tar", "symlink"},
                                                        {"hardlink.tar", "hard link"},
                                                        {"device.tar", "not a regular file"}}) {
    fs::create_directories(p("x/" + file));
    auto s = extract_tar(p("tars/" + file), p("x/" + file));
    ASSERT_FALSE(s.ok()) << file;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << file << ": " << s.message();
    auto pkg = load_package(p("tars/" + file));
    EXPECT_FALSE(pkg.ok()) << file;
  }
  EXPECT_FALSE(fs::exists(p("x/escaped.txt")));
  EXPECT_FALSE(fs::exists(p("tars/abs_escaped.txt")));
}

TEST_F(PackageTest, TruncatedAndCorruptTarsAreErrors) {
  ASSERT_TRUE(pack_package(model_, p("m.tar"), {}).ok());
  const std::string bytes = *read_file(p("m.tar"));
  for (size_t n : {size_t{0}, size_t{10}, size_t{511}, size_t{512}, size_t{700}, bytes.size() / 2,
                   bytes.size() - 1500}) {
    ASSERT_TRUE(write_file(p("t.tar"), bytes.substr(0, n)).ok());
    auto pkg = load_package(p("t.tar"));
    EXPECT_FALSE(pkg.ok()) << "tar truncated to " << n << " bytes loaded";
    if (!pkg.ok()) {
      EXPECT_FALSE(pkg.status().message().empty());
    }
  }
  std::string corrupt = bytes;
  for (size_t i = 0; i < 512; i += 7) corrupt[i] = static_cast<char>(0xA5);
  ASSERT_TRUE(write_file(p("c.tar"), corrupt).ok());
  EXPECT_FALSE(load_package(p("c.tar")).ok());
}

}  // namespace
}  // namespace gantry::model
