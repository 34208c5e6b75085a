// Package: a model ready to load — its manifest plus a directory on disk that holds the model files, or
// (PackageKind::kMemory, from load_package(ModelSource) in gantry/model/model_source.h) a bare model held
// in a sealed MemoryImage.
//
// load_package() accepts three kinds of path:
//   - a directory holding gantry.json and the files it names;
//   - a `.tar` archive of such a directory (gantry.json at the archive root), extracted into a private
//     temporary directory that lives as long as any copy of the Package;
//   - a bare model file (`.onnx` or `.gguf`, recognised by extension or magic bytes), loaded with a
//     synthesised manifest: name = file stem, version "0.0.0", format from the file, sha256 computed.
//
// Every file the manifest names must resolve inside the package directory (symlinks included); every
// sha256 entry is verified (unless LoadOptions::verify_checksums is false). Failures name the file:
// "package /p: model.onnx: sha256 mismatch (manifest abc..., file def...)".
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/model/manifest.h"

namespace gantry::model {

class MemoryImage;

enum class PackageKind { kDirectory, kTar, kBareModel, kMemory };
// "directory" | "tar" | "model file" | "memory"
std::string_view package_kind_name(PackageKind k);

struct LoadOptions {
  bool verify_checksums = true;
};

class Package {
 public:
  Package() = default;

  const Manifest& manifest() const { return manifest_; }
  PackageKind kind() const { return kind_; }
  // What the caller passed to load_package() (for a model in memory: its name, e.g. the URL).
  const std::filesystem::path& source() const { return source_; }
  // Directory holding the model files (the extraction directory for a tar; the file's directory for a bare
  // model file; empty for a model in memory).
  const std::filesystem::path& root() const { return root_; }
  // Absolute path of manifest().model_file inside root(); for a model in memory, its image's
  // "/proc/self/fd/N" (readable by path in this process while the Package lives).
  std::filesystem::path model_path() const;
  // The bytes of a model in memory (kind() == kMemory), else nullptr.
  const std::shared_ptr<const MemoryImage>& image() const { return image_; }
  // SHA-256 of the model file as recorded in (or computed for) the manifest.
  const std::string& model_sha256() const;
  // True when the manifest was synthesised for a bare model file.
  bool synthesized_manifest() const { return kind_ == PackageKind::kBareModel; }

 private:
  friend Result<Package> load_package(const std::filesystem::path&, const LoadOptions&);
  friend Result<Package> package_from_memory(std::shared_ptr<const MemoryImage>, Manifest, std::string);
  Manifest manifest_;
  PackageKind kind_ = PackageKind::kDirectory;
  std::filesystem::path source_;
  std::filesystem::path root_;
  std::shared_ptr<const std::filesystem::path> temp_dir_;  // removes the extraction dir with the last copy
  std::shared_ptr<const MemoryImage> image_;               // a model in memory
};

Result<Package> load_package(const std::filesystem::path& path, const LoadOptions& options = {});

// True when `path` is a package archive as load_package() reads it: a .tar, or a file with the ustar magic.
Result<bool> is_package_archive(const std::filesystem::path& path);

// Format of a model file: magic bytes first ("GGUF" for GGUF; an ONNX ModelProto otherwise recognised by
// extension .onnx), then the extension. InvalidArgument naming the file when neither tells.
Result<ModelFormat> detect_model_format(const std::filesystem::path& model_file);

// The manifest load_package() synthesises for a bare model file (computes its sha256).
Result<Manifest> synthesize_manifest(const std::filesystem::path& model_file);

// Resolves `relative` (a manifest path) inside `root`, following symlinks, and fails with InvalidArgument
// naming `field` and the file when the result leaves root; NotFound when the file does not exist.
Result<std::filesystem::path> resolve_package_file(const std::filesystem::path& root,
                                                   std::string_view relative, std::string_view field);

// Verifies every manifest.sha256 entry against the files under root (each resolved as above).
Status verify_checksums(const Manifest& manifest, const std::filesystem::path& root);

struct PackOptions {
  std::string name;     // default: the model file's stem
  std::string version;  // default: "0.0.0"
  std::string task;
  std::optional<std::string> preferred_provider;
  std::vector<std::string> fallback_providers;
  std::string model_file;  // for a source directory: which file is the model (default: the only .onnx/.gguf)
  bool overwrite = false;  // replace an existing destination
};

// Builds a package from `source` (a model file, or a directory holding exactly one .onnx/.gguf model or a
// gantry.json) into `destination`: a directory, or a tar archive when the name ends in ".tar". All regular
// files of a source directory are included (with their sha256) except an existing gantry.json, whose fields
// are kept unless an option overrides them. Returns the manifest written.
Result<Manifest> pack_package(const std::filesystem::path& source, const std::filesystem::path& destination,
                              const PackOptions& options = {});

}  // namespace gantry::model
