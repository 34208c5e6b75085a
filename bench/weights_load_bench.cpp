// BENCH weights-safetensors-load: bytes/s loading every tensor of a ~500 MB safetensors file into owned
// memory through the weight loader (WeightLoader, zero_copy = false), divided by bytes/s of plain read()
// of the same file into a fresh buffer, page cache warm, alternating in the same run, the order swapped
// every round (read() first in even rounds, the loader first in odd ones; median of 6).
// The file is generated in /tmp and deleted afterwards. GANTRY_WEIGHTS_BENCH_MB changes its size.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gantry/weights/loader.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// A safetensors file of `n` f32 tensors of `elems` elements each, by the published layout.
bool write_file(const fs::path& path, int n, size_t elems) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (int i = 0; i < n; ++i) {
    const size_t b = static_cast<size_t>(i) * elems * 4;
    header += ",\"layers." + std::to_string(i) + ".weight\":{\"dtype\":\"F32\",\"shape\":[" +
              std::to_string(elems / 1024) + ",1024],\"data_offsets\":[" + std::to_string(b) + "," +
              std::to_string(b + elems * 4) + "]}";
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  uint64_t len = header.size();
  std::fwrite(&len, 8, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::vector<float> data(elems);
  for (int i = 0; i < n; ++i) {
    for (size_t j = 0; j < elems; ++j) data[j] = static_cast<float>(i) + static_cast<float>(j) * 1e-6f;
    if (std::fwrite(data.data(), 4, elems, f) != elems) {
      std::fclose(f);
      return false;
    }
  }
  return std::fclose(f) == 0;
}

// Plain read() of the whole file into a fresh buffer; bytes read.
size_t read_all(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return 0;
  const size_t size = fs::file_size(path);
  std::unique_ptr<std::byte[]> buf(new std::byte[size]);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, buf.get() + done, std::min<size_t>(size - done, size_t{1} << 30));
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  volatile std::byte sink = buf[size / 2];
  (void)sink;
  return done;
}

// Every tensor through the loader into owned memory; bytes loaded (0 on error).
size_t load_all(const fs::path& path) {
  auto src = gantry::weights::WeightSource::file(path);
  if (!src.ok()) return 0;
  gantry::weights::LoadOptions o;
  o.zero_copy = false;
  auto l = gantry::weights::WeightLoader::open(*src, o);
  if (!l.ok()) return 0;
  size_t bytes = 0;
  std::vector<gantry::weights::Weight> keep;  // all held at once, like a model's weights
  for (const auto& t : l->metadata().tensors) {
    auto w = l->load({t.name});
    if (!w.ok()) {
      std::fprintf(stderr, "load %s: %s\n", t.name.c_str(), w.status().to_string().c_str());
      return 0;
    }
    bytes += w->data.byte_size();
    keep.push_back(std::move(*w));
  }
  return bytes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const char* mb_env = std::getenv("GANTRY_WEIGHTS_BENCH_MB");
  const int mb = mb_env ? std::max(8, std::atoi(mb_env)) : 512;
  const size_t elems = size_t{1} << 20;  // 4 MiB per tensor
  const int n = mb / 4;
  const fs::path path =
      fs::temp_directory_path() / ("gantry-weights-bench-" + std::to_string(::getpid()) + ".safetensors");
  if (!write_file(path, n, elems)) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::error_code ec;
    fs::remove(path, ec);
    return 1;
  }
  const double size = static_cast<double>(fs::file_size(path));
  read_all(path);  // warm the page cache
  read_all(path);
  std::vector<double> ours, ref;
  bool ok = true;
  // Bytes per second of one call of `f` (returning the bytes it handled); 0 bytes fails the run.
  auto timed = [&](size_t (*f)(const fs::path&), size_t want, std::vector<double>& rates) {
    const auto t0 = Clock::now();
    const size_t got = f(path);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    ok = ok && got == want;
    rates.push_back(static_cast<double>(got) / s);
  };
  const size_t file_bytes = static_cast<size_t>(size), tensor_bytes = static_cast<size_t>(n) * elems * 4;
  for (int rep = 0; rep < 6 && ok; ++rep) {
    if (rep % 2 == 0) {
      timed(read_all, file_bytes, ref);
      timed(load_all, tensor_bytes, ours);
    } else {
      timed(load_all, tensor_bytes, ours);
      timed(read_all, file_bytes, ref);
    }
  }
  std::error_code ec;
  fs::remove(path, ec);
  if (!ok) {
    std::fprintf(stderr, "weights-safetensors-load: a read or load failed\n");
    return 1;
  }
  const double o = median(ours), r = median(ref);
  std::fprintf(stderr, "weights-safetensors-load: %.0f MB file, loader %.2f GB/s, read() %.2f GB/s\n",
               size / 1e6, o / 1e9, r / 1e9);
  std::printf("BENCH weights-safetensors-load ratio=%.3f\n", o / r);
  std::fflush(stdout);
  return 0;
}
