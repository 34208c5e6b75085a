// Which format a source holds, and a checkpoint directory's layout. PyTorch pickles are recognised only
// to be refused: unpickling runs arbitrary code.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "gantry/core/file_io.h"
#include "weights/catalog.h"

namespace gantry::weights {
namespace {

namespace fs = std::filesystem;

Status pickle_refusal(const std::string& label) {
  return Unsupported(label +
                     ": a PyTorch pickle checkpoint; Gantry never unpickles (it can run arbitrary code); "
                     "convert it to safetensors, e.g. in Python: "
                     "safetensors.torch.save_file(torch.load(f, weights_only=True), \"model.safetensors\")");
}

std::string lower_name(const WeightSource& src) {
  // A memory source goes by its label (the caller's name for the bytes).
  std::string name = src.kind() == WeightSource::Kind::kUrl      ? src.url_string()
                     : src.kind() == WeightSource::Kind::kMemory ? src.label()
                                                                 : src.path().filename().string();
  if (src.kind() == WeightSource::Kind::kUrl) {
    name = name.substr(0, name.find_first_of("?#"));
    name = name.substr(name.rfind('/') + 1);
  }
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name;
}

}  // namespace

Result<WeightFormat> detect_format(const WeightSource& src) {
  const std::string name = lower_name(src);
  for (const char* ext : {".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"})
    if (name.ends_with(ext)) return pickle_refusal(src.label());
  if (name.ends_with(".json")) return WeightFormat::kSafetensorsIndex;
  GANTRY_ASSIGN_OR_RETURN(Bytes head, src.read(0, std::min<uint64_t>(src.size(), 16)));
  const auto& b = head.data;
  auto at = [&](size_t i) { return i < b.size() ? std::to_integer<uint8_t>(b[i]) : 0; };
  auto starts = [&](std::string_view m) {
    return b.size() >= m.size() && std::memcmp(b.data(), m.data(), m.size()) == 0;
  };
  if (starts("GGUF")) return WeightFormat::kGguf;
  if (starts("\x93NUMPY")) return WeightFormat::kNpy;
  if (starts("PK\x03\x04") || starts("PK\x05\x06")) {
    GANTRY_ASSIGN_OR_RETURN(Bytes all, src.read(0, src.size()));
    GANTRY_ASSIGN_OR_RETURN(auto members, zip_member_names(all.data, src.label()));
    for (const auto& m : members)
      if (m.ends_with(".pkl")) return pickle_refusal(src.label());
    return WeightFormat::kNpz;
  }
  if (at(0) == 0x80 && at(1) >= 2 && at(1) <= 5) return pickle_refusal(src.label());
  if (name.ends_with(".safetensors") || (b.size() >= 9 && at(8) == '{')) return WeightFormat::kSafetensors;
  if (name.ends_with(".onnx") || at(0) == 0x08) return WeightFormat::kOnnx;
  if (name.ends_with(".gguf")) return WeightFormat::kGguf;  // the GGUF reader says what is wrong
  return Unsupported(
      src.label() +
      ": not a weight format Gantry reads (safetensors, .npy, .npz, ONNX, GGUF, or a checkpoint "
      "directory)");
}

Result<Catalog> parse_directory(const WeightSource& dir, const HttpOptions& http) {
  const fs::path d = dir.path();
  std::error_code ec;
  std::optional<Result<Catalog>> cat;
  if (fs::exists(d / "model.safetensors.index.json", ec)) {
    GANTRY_ASSIGN_OR_RETURN(auto idx, WeightSource::file(d / "model.safetensors.index.json"));
    cat.emplace(parse_safetensors_index(idx, http));
  } else if (fs::exists(d / "model.safetensors", ec)) {
    GANTRY_ASSIGN_OR_RETURN(auto f, WeightSource::file(d / "model.safetensors"));
    cat.emplace(parse_safetensors(f));
  } else {
    std::vector<fs::path> indexes, singles;
    bool pickles = false;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string n = e.path().filename().string();
      if (n.ends_with(".safetensors.index.json"))
        indexes.push_back(e.path());
      else if (n.ends_with(".safetensors"))
        singles.push_back(e.path());
      else if (n.ends_with(".bin") || n.ends_with(".pt") || n.ends_with(".pth"))
        pickles = true;
    }
    if (ec) return IoError(dir.label() + ": " + ec.message());
    if (indexes.size() == 1) {
      GANTRY_ASSIGN_OR_RETURN(auto idx, WeightSource::file(indexes[0]));
      cat.emplace(parse_safetensors_index(idx, http));
    } else if (indexes.empty() && singles.size() == 1) {
      GANTRY_ASSIGN_OR_RETURN(auto f, WeightSource::file(singles[0]));
      cat.emplace(parse_safetensors(f));
    } else if (indexes.size() + singles.size() > 1) {
      return InvalidArgument(dir.label() +
                             ": several safetensors files and no model.safetensors.index.json; "
                             "name one file");
    } else if (pickles) {
      return pickle_refusal(dir.label());
    } else {
      return NotFound(dir.label() +
                      ": no model.safetensors or model.safetensors.index.json in this directory");
    }
  }
  if (!cat->ok()) return cat->status();
  Catalog out = std::move(**cat);
  if (fs::exists(d / "config.json", ec)) {
    auto cfg = read_file(d / "config.json", uint64_t{16} << 20);
    if (!cfg.ok()) return cfg.status().with_context(dir.label());
    out.meta.config_json = std::move(*cfg);
  }
  out.meta.source = dir.label();
  return out;
}

Result<Catalog> parse_source(const WeightSource& src, const HttpOptions& http) {
  if (src.kind() == WeightSource::Kind::kDirectory) return parse_directory(src, http);
  GANTRY_ASSIGN_OR_RETURN(WeightFormat f, detect_format(src));
  switch (f) {
    case WeightFormat::kSafetensors:
      return parse_safetensors(src);
    case WeightFormat::kSafetensorsIndex:
      return parse_safetensors_index(src, http);
    case WeightFormat::kNpy:
      return parse_npy(src);
    case WeightFormat::kNpz:
      return parse_npz(src);
    case WeightFormat::kOnnx:
      return parse_onnx(src);
    case WeightFormat::kGguf:
      return parse_gguf(src);
  }
  return Internal("unknown weight format");
}

}  // namespace gantry::weights
