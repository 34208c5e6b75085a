// Fuzzes model.safetensors.index.json: the input is written as the index of a checkpoint directory
// that holds one valid shard (s1.safetensors) and has a file beside it (outside.safetensors) that no
// index may reach. Loading anything from outside the directory aborts.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "weights_fuzz_common.h"

namespace {

std::filesystem::path g_dir;

std::string shard(float value) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string out(8, '\0');
  out[0] = static_cast<char>(header.size());
  out += header;
  out.append(reinterpret_cast<const char*>(&value), 4);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tpl[] = "/tmp/gantry-index-fuzz-XXXXXX";
  g_dir = ::mkdtemp(tpl);
  std::filesystem::create_directories(g_dir / "ckpt");
  std::ofstream(g_dir / "ckpt" / "s1.safetensors", std::ios::binary) << shard(1.0f);
  std::ofstream(g_dir / "outside.safetensors", std::ios::binary) << shard(-1.0f);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto index = g_dir / "ckpt" / "model.safetensors.index.json";
  std::ofstream(index, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  auto src = gantry::weights::WeightSource::file(index);
  if (!src.ok()) return 0;
  auto l = gantry::weights::WeightLoader::open(*src);
  if (!l.ok()) {
    if (l.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& t : l->metadata().tensors) {
    auto w = l->load({t.name});
    if (w.ok() && w->data.byte_size() == 4 && *static_cast<const float*>(w->data.data()) == -1.0f)
      std::abort();  // read the file outside the checkpoint directory
  }
  return 0;
}
