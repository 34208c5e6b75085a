#include "gantry/model/model_repository.h"

#include <gtest/gtest.h>

#include <fstream>

namespace gantry::model {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("gantry_repo_" + std::to_string(::getpid()) + "_" +
                                               std::to_string(reinterpret_cast<uintptr_t>(this)));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(ModelRepository, NamesModelsByPackageNameElseFileStem) {
  TempDir d;
  std::ofstream(d.path / "tiny-llama.gguf") << "GGUF";
  std::ofstream(d.path / "vad.onnx") << "x";
  std::ofstream(d.path / "notes.txt") << "ignored";
  fs::create_directories(d.path / "pkgdir");
  std::ofstream(d.path / "pkgdir" / "gantry.json")
      << R"({"name": "detector", "version": "1.0.0", "format": "onnx", "model_file": "m.onnx",
            "sha256": {"m.onnx": "0000000000000000000000000000000000000000000000000000000000000000"}})";
  ModelRepository repo;
  ASSERT_TRUE(repo.add_directory(d.path).ok());
  auto entries = repo.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "detector");
  EXPECT_EQ(entries[1].name, "tiny-llama");
  EXPECT_EQ(entries[2].name, "vad");
  ASSERT_NE(repo.find("vad"), nullptr);
  EXPECT_EQ(repo.find("vad")->source, d.path / "vad.onnx");
  EXPECT_EQ(repo.find("../vad"), nullptr);
}

TEST(ModelRepository, FilesAreTakenByWhatTheyHoldAsTheModelLayerTellsIt) {
  TempDir d;
  std::ofstream(d.path / "renamed.bin") << "GGUF";  // a GGUF file by its magic, whatever its extension
  std::ofstream(d.path / "broken.gguf") << "nope";  // listed: loading it says it is not a GGUF file
  std::ofstream(d.path / "data.bin") << "neither";
  ModelRepository repo;
  ASSERT_TRUE(repo.add_directory(d.path).ok());
  auto entries = repo.entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "broken");
  EXPECT_EQ(entries[1].name, "renamed");
}

TEST(ModelRepository, TwoModelsWithOneNameIsAnError) {
  TempDir a, b;
  std::ofstream(a.path / "m.onnx") << "x";
  std::ofstream(b.path / "m.gguf") << "GGUF";
  ModelRepository repo;
  ASSERT_TRUE(repo.add(a.path / "m.onnx").ok());
  ASSERT_TRUE(repo.add(a.path / "m.onnx").ok()) << "the same file twice is fine";
  Status st = repo.add(b.path / "m.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("two models are named 'm'"), std::string::npos) << st.message();
}

TEST(ModelRepository, MissingPathsAreNamed) {
  ModelRepository repo;
  EXPECT_EQ(repo.add_directory("/nonexistent/dir").code(), StatusCode::kNotFound);
  Status st = repo.add("/nonexistent/model.onnx");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent/model.onnx"), std::string::npos);
}

TEST(ModelRepository, RenameServesAModelUnderAnotherName) {
  TempDir d;
  std::ofstream(d.path / "model.onnx") << "x";
  std::ofstream(d.path / "other.onnx") << "x";
  ModelRepository repo;
  ASSERT_TRUE(repo.add(d.path / "model.onnx").ok());
  ASSERT_TRUE(repo.add(d.path / "other.onnx").ok());
  ASSERT_TRUE(repo.rename("model", "classifier").ok());
  EXPECT_EQ(repo.find("model"), nullptr);
  ASSERT_NE(repo.find("classifier"), nullptr);
  EXPECT_EQ(repo.find("classifier")->runtime_name, "classifier") << "it loads under its new name";
  EXPECT_EQ(repo.rename("classifier", "other").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.rename("missing", "x").code(), StatusCode::kNotFound);
}

TEST(ModelRepository, ADirectoryThatIsAPackageIsThatOneModel) {
  TempDir d;  // KServe's storage initializer unpacks a package straight into /mnt/models
  std::ofstream(d.path / "gantry.json")
      << R"({"name": "detector", "version": "1.0.0", "format": "onnx", "model_file": "m.onnx",
            "sha256": {"m.onnx": "0000000000000000000000000000000000000000000000000000000000000000"}})";
  std::ofstream(d.path / "m.onnx") << "x";
  ModelRepository repo;
  ASSERT_TRUE(repo.add_directory(d.path).ok());
  auto entries = repo.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, "detector");
  EXPECT_EQ(entries[0].source, d.path);
}

TEST(ModelRepository, CopyGivesASecondNameForTheSameModel) {
  TempDir d;
  std::ofstream(d.path / "m.gguf") << "GGUF";
  std::ofstream(d.path / "other.gguf") << "GGUF";
  ModelRepository repo;
  ASSERT_TRUE(repo.add(d.path / "m.gguf").ok());
  ASSERT_TRUE(repo.add(d.path / "other.gguf").ok());
  ASSERT_TRUE(repo.copy("m", "m2").ok());
  auto copy = repo.find("m2");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->name, "m2");
  EXPECT_EQ(copy->source, d.path / "m.gguf");
  EXPECT_EQ(copy->runtime_name, "m") << "both names share one loaded model";
  EXPECT_TRUE(repo.copy("m", "m2").ok()) << "copying again onto the same model is a no-op";
  EXPECT_EQ(repo.copy("nope", "x").code(), StatusCode::kNotFound);
  Status taken = repo.copy("m", "other");
  EXPECT_EQ(taken.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(taken.message().find("'other' is taken"), std::string::npos) << taken.message();

  // Removing the original keeps the copy (and the model it loads as) in use.
  auto removed = repo.remove("m");
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(removed->name, "m");
  EXPECT_EQ(repo.find("m"), nullptr);
  EXPECT_TRUE(repo.in_use("m"));
  EXPECT_EQ(copy->name, "m2") << "a found entry stays valid after removals";
  ASSERT_NE(repo.remove("m2"), nullptr);
  EXPECT_FALSE(repo.in_use("m"));
  EXPECT_EQ(repo.remove("m2"), nullptr);
  EXPECT_EQ(repo.entries().size(), 1u);
}

TEST(ModelRepository, HiddenFilesAreNeverListed) {
  TempDir d;
  std::ofstream(d.path / "good.gguf") << "GGUF";
  // What a pull killed mid-download leaves: it starts with the magic, but is not a whole model.
  std::ofstream(d.path / ".good2.gguf.partial-12345-0") << "GGUF";
  std::ofstream(d.path / ".swap.gguf") << "GGUF";
  fs::create_directories(d.path / "..data");
  std::ofstream(d.path / "..data" / "gantry.json") << "{}";
  ModelRepository repo;
  ASSERT_TRUE(repo.add_directory(d.path).ok());
  auto entries = repo.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, "good");
}

TEST(ModelRepository, AnEntryThatCannotBeListedIsReportedAndTheOthersAre) {
  TempDir d;
  std::ofstream(d.path / "good.gguf") << "GGUF";
  fs::create_directories(d.path / "badpkg");
  std::ofstream(d.path / "badpkg" / "gantry.json") << "{ not json";
  ModelRepository strict;
  EXPECT_FALSE(strict.add_directory(d.path).ok()) << "without a problem list the first one is the error";
  ModelRepository repo;
  std::vector<RepositoryProblem> problems;
  ASSERT_TRUE(repo.add_directory(d.path, &problems).ok());
  ASSERT_EQ(repo.entries().size(), 1u);
  EXPECT_EQ(repo.entries()[0].name, "good");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].name, "badpkg");
  EXPECT_EQ(problems[0].source, d.path / "badpkg");
  EXPECT_FALSE(problems[0].reason.empty());
}

TEST(ModelRepository, CopiesAreBounded) {
  TempDir d;
  std::ofstream(d.path / "m.gguf") << "GGUF";
  std::ofstream(d.path / "n.gguf") << "GGUF";
  ModelRepository repo;
  ASSERT_TRUE(repo.add_directory(d.path).ok());
  EXPECT_EQ(repo.copies(), 0u);
  ASSERT_TRUE(repo.copy("m", "m1", 2).ok());
  ASSERT_TRUE(repo.copy("n", "n1", 2).ok());
  EXPECT_EQ(repo.copies(), 2u);
  Status full = repo.copy("m", "m2", 2);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("at most 2"), std::string::npos) << full.message();
  EXPECT_EQ(repo.find("m2"), nullptr);
  EXPECT_TRUE(repo.copy("m", "m1", 2).ok()) << "a copy that exists already is no new name";
  ASSERT_TRUE(repo.copy("m1", "m1b", 3).ok()) << "a copy of a copy counts too";
  EXPECT_EQ(repo.copies(), 3u);
  ASSERT_NE(repo.remove("m1"), nullptr);
  EXPECT_EQ(repo.copies(), 2u);
  EXPECT_TRUE(repo.copy("m", "m2", 3).ok()) << "a deleted copy frees its place";
  ASSERT_TRUE(repo.rename("n", "renamed").ok());
  EXPECT_EQ(repo.copies(), 3u) << "a rename is no copy";
}

}  // namespace
}  // namespace gantry::model
