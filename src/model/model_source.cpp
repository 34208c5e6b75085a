#include "gantry/model/model_source.h"

#include <cstring>
#include <string_view>

#include "gantry/model/onnx_info.h"
#include "gantry/model/sha256.h"

namespace gantry::model {
namespace fs = std::filesystem;
namespace {

bool starts_with(std::span<const std::byte> bytes, std::string_view magic, size_t at = 0) {
  return bytes.size() >= at + magic.size() && std::memcmp(bytes.data() + at, magic.data(), magic.size()) == 0;
}

std::string_view extension_of(std::string_view file) {
  const auto dot = file.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : file.substr(dot);
}

Result<ModelFormat> format_of(std::span<const std::byte> bytes, const ModelSource& src,
                              std::string_view file) {
  const std::string& label = src.name;
  if (bytes.empty()) return Corrupt(label + ": no bytes (an empty model)");
  const bool gguf = starts_with(bytes, "GGUF");
  if (gguf) {
    if (src.format && *src.format != ModelFormat::kGguf)
      return Corrupt(label + ": the format hint says " + std::string(model_format_name(*src.format)) +
                     " but the bytes are a GGUF file");
    return ModelFormat::kGguf;
  }
  if (starts_with(bytes, "ustar", 257))
    return Unsupported(label +
                       ": a package archive cannot be loaded from memory; give a bare .onnx or .gguf "
                       "model, or load the archive from a file");
  const std::string_view ext = extension_of(file);
  const std::optional<ModelFormat> format = src.format       ? src.format
                                            : ext == ".gguf" ? std::optional(ModelFormat::kGguf)
                                            : ext == ".onnx" ? std::optional(ModelFormat::kOnnx)
                                                             : std::nullopt;
  if (!format)
    return InvalidArgument(
        label +
        ": cannot tell the model format (no GGUF magic, no .onnx/.gguf name); give a format "
        "hint");
  if (*format == ModelFormat::kGguf)
    return Corrupt(label + ": not a GGUF file (it does not start with the 'GGUF' magic)");
  return ModelFormat::kOnnx;
}

}  // namespace

ModelSource ModelSource::file(fs::path path) {
  ModelSource s;
  s.path = std::move(path);
  return s;
}

ModelSource ModelSource::memory(std::shared_ptr<const MemoryImage> image, std::string name,
                                std::optional<ModelFormat> format) {
  ModelSource s;
  s.image = std::move(image);
  s.name = std::move(name);
  s.format = format;
  return s;
}

Result<ModelSource> ModelSource::copy_of(std::span<const std::byte> bytes, std::string name,
                                         std::optional<ModelFormat> format) {
  GANTRY_ASSIGN_OR_RETURN(auto image, MemoryImage::copy_of(bytes, source_file_name(name)));
  return memory(std::move(image), std::move(name), format);
}

bool is_model_url(std::string_view s) {
  return s.starts_with("http://") || s.starts_with("https://") || s.starts_with("hf://");
}

std::string source_file_name(std::string_view name) {
  if (const auto cut = name.find_first_of("?#"); cut != std::string_view::npos && is_model_url(name))
    name = name.substr(0, cut);
  if (is_model_url(name)) {
    // Past the authority: "https://host" has no path.
    const auto scheme = name.find("://") + 3;
    const auto slash = name.find('/', scheme);
    name = slash == std::string_view::npos ? std::string_view() : name.substr(slash);
  }
  const auto slash = name.find_last_of('/');
  return std::string(slash == std::string_view::npos ? name : name.substr(slash + 1));
}

Result<Package> package_from_memory(std::shared_ptr<const MemoryImage> image, Manifest manifest,
                                    std::string source) {
  Package p;
  p.manifest_ = std::move(manifest);
  p.kind_ = PackageKind::kMemory;
  p.source_ = std::move(source);
  p.image_ = std::move(image);
  return p;
}

Result<Package> load_package(const ModelSource& source, const LoadOptions& options) {
  if (!source.in_memory()) return load_package(source.path, options);
  const MemoryImage& image = *source.image;
  if (!image.sealed())
    return FailedPrecondition(source.name +
                              ": the model's memory image is not sealed; seal it before loading");
  const auto bytes = image.bytes();
  std::string file = source_file_name(source.name);
  GANTRY_ASSIGN_OR_RETURN(const ModelFormat format, format_of(bytes, source, file));
  if (format == ModelFormat::kOnnx) {
    auto info = parse_onnx_info(bytes, source.name);
    if (!info.ok()) return Corrupt(info.status().message());  // names the source
    if (info->uses_external_data)
      return Unsupported(source.name +
                         ": the ONNX model keeps weights in external data files, which a model loaded from "
                         "memory cannot reach; load it from a package directory instead");
  }
  const std::string_view want = format == ModelFormat::kGguf ? ".gguf" : ".onnx";
  if (extension_of(file) != want || file.size() == want.size() ||
      !check_relative_package_path(file, source.name).ok())
    file = "model" + std::string(want);
  Manifest m;
  m.name = fs::path(file).stem().string();
  m.version = "0.0.0";
  m.format = format;
  m.model_file = file;
  m.sha256.emplace(file,
                   sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  (void)options;  // the checksum is computed from the bytes themselves: nothing to verify
  return package_from_memory(source.image, std::move(m), source.name);
}

}  // namespace gantry::model
