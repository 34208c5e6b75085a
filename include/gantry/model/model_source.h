// ModelSource: where a model comes from — a path (a model file, package directory or .tar, as
// load_package(path) takes it) or bytes in memory (a bare ONNX or GGUF model, e.g. fetched from a URL),
// with a name and an optional format hint.
//
// A model in memory lives in a sealed MemoryImage (gantry/model/memory_image.h) and is never written to
// disk: ONNX Runtime reads its bytes (CreateSessionFromArray), llama.cpp maps it by its
// "/proc/self/fd/N" path. Everything that sizes or inspects a model reads the image as it would the file,
// so a model from bytes gets the same memory estimate, reservation and outputs as from its file.
//
// Contract of load_package(ModelSource) for bytes:
// - the format is the GGUF magic; else the `format` hint; else the extension of the name's last path
//   segment (".onnx", ".gguf"; a URL's query and fragment are ignored). A name ending in .gguf whose bytes
//   lack the magic, a format hint the bytes contradict, and bytes an ONNX parser rejects are Corrupt
//   naming the source; a package archive (ustar) in memory is Unsupported; bytes whose format nothing
//   tells are InvalidArgument asking for a hint. Empty bytes are Corrupt.
// - an ONNX model whose weights live in external data files is Unsupported (nothing in memory can
//   reach them): load it from a package directory instead.
// - the manifest is synthesised as for a bare file: name = the last segment's stem (else "model"),
//   version 0.0.0, model_file = the last segment (else "model.onnx" / "model.gguf"), its sha256
//   computed over the bytes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "gantry/core/status.h"
#include "gantry/model/manifest.h"
#include "gantry/model/memory_image.h"
#include "gantry/model/package.h"

namespace gantry::model {

struct ModelSource {
  // A model file, package directory or .tar on disk.
  static ModelSource file(std::filesystem::path path);
  // A bare model in `image` (sealed), named `name` (a file name or a URL).
  static ModelSource memory(std::shared_ptr<const MemoryImage> image, std::string name,
                            std::optional<ModelFormat> format = std::nullopt);
  // A bare model: `bytes` copied into a new sealed MemoryImage.
  static Result<ModelSource> copy_of(std::span<const std::byte> bytes, std::string name,
                                     std::optional<ModelFormat> format = std::nullopt);

  bool in_memory() const { return image != nullptr; }
  // What errors and the model list show: the path, or the name of a model in memory.
  std::string label() const { return in_memory() ? name : path.string(); }

  std::filesystem::path path;                // on disk (when image is null)
  std::shared_ptr<const MemoryImage> image;  // in memory
  std::string name;
  std::optional<ModelFormat> format;
};

Result<Package> load_package(const ModelSource& source, const LoadOptions& options = {});

// The last path segment of `name` (a path or URL; a query and fragment dropped): "x.gguf" for
// "https://h/m/x.gguf?download=1".
std::string source_file_name(std::string_view name);

// True for an http:// or https:// URL, or a Hugging Face Hub file (hf://OWNER/REPO[@REVISION]/PATH,
// gantry/weights/hub_url.h), all fetched by the weights' URL source.
bool is_model_url(std::string_view s);

// (Internal to load_package: a Package over `image` with `manifest`.)
Result<Package> package_from_memory(std::shared_ptr<const MemoryImage> image, Manifest manifest,
                                    std::string source);

}  // namespace gantry::model
