// gantry kernel run FILE.cu|FILE.cpp --entry NAME --grid X[,Y,Z] --block X[,Y,Z] --arg ... [--device D]
// gantry kernel info FILE --entry NAME [--device D]
// gantry kernel compile FILE.cu --entry NAME [--arch sm_90] -o OUT.cubin|OUT.ptx
//   Runs, describes or compiles a user kernel through the KernelExecutor (docs/kernels.md). --arg forms:
//   TYPE:VALUE (a scalar: f32:2.0, i32:7, u64:1, bool:true), in:FILE.npy (an input tensor),
//   out:FILE.npy:DTYPE:[D0,D1,...] (a zero-filled output written to FILE.npy), inout:FILE.npy (read, then
//   written back), local:BYTES (dynamic local/shared memory per block).
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "gantry/core/file_io.h"
#include "gantry/core/npy.h"
#include "gantry/hw/detect.h"
#include "gantry/kernels/executor.h"
#include "gantry/memory/budget.h"

namespace gantry::cli {

namespace {

namespace fs = std::filesystem;
using kernels::KernelArg;
using kernels::KernelExecutor;

struct KernelArgs {
  std::string file;
  std::string entry;
  std::string device;
  std::string grid = "1";
  std::string block = "1";
  std::vector<std::string> args;
  std::vector<std::string> flags;
  uint64_t shared = 0;
  std::string arch;
  std::string output;
  bool no_cache = false;
};

bool is_cuda_file(const std::string& file) { return fs::path(file).extension() == ".cu"; }

std::string default_device(const KernelArgs& a) {
  if (!a.device.empty()) return a.device;
  return is_cuda_file(a.file) ? "cuda:0" : "cpu";
}

int fail(const Status& s, int code = 1) {
  std::cerr << "gantry kernel: error: " << s.message() << "\n";
  return code;
}

Result<std::string> read_source(const std::string& file) {
  auto text = read_file(file, uint64_t{16} << 20);
  if (!text.ok()) return text.status().with_context("kernel source");
  return text;
}

kernels::KernelOptions kernel_options(const KernelArgs& a) {
  kernels::KernelOptions o;
  o.source_name = fs::path(a.file).filename().string();
  o.flags = a.flags;
  o.arch = a.arch;
  o.use_cache = !a.no_cache;
  return o;
}

// "[1024]", "[4,8]", "[]" (a scalar tensor).
Result<Shape> parse_shape(std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    return InvalidArgument("shape '" + std::string(text) + "' is not [D0,D1,...]");
  std::vector<int64_t> dims;
  std::string_view rest = text.substr(1, text.size() - 2);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string part(rest.substr(0, comma));
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0)
      return InvalidArgument("shape '" + std::string(text) + "' has a bad dimension '" + part + "'");
    dims.push_back(v);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return Shape(std::move(dims));
}

struct Output {
  fs::path file;
  TensorView device;  // the executor's memory, until it is destroyed
};

// Turns the --arg list into launch arguments (tensors copied to `device`) and the outputs to write back.
Result<std::vector<KernelArg>> build_args(KernelExecutor& ex, const std::string& device,
                                          const std::vector<std::string>& specs,
                                          std::vector<Output>& outputs) {
  std::vector<KernelArg> out;
  for (const auto& spec : specs) {
    const auto colon = spec.find(':');
    const std::string kind = spec.substr(0, colon);
    const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
    auto ctx = [&](const Status& s) { return s.with_context("--arg " + spec); };
    if (kind == "in" || kind == "inout") {
      auto host = read_npy(rest);
      if (!host.ok()) return ctx(host.status());
      auto dev = ex.allocate(device, host->dtype(), host->shape());
      if (!dev.ok()) return ctx(dev.status());
      if (Status s = ex.copy_to_device(*host, *dev); !s.ok()) return ctx(s);
      if (kind == "inout") outputs.push_back({rest, *dev});
      out.push_back(KernelArg::tensor(*dev));
    } else if (kind == "out") {
      // FILE.npy:DTYPE:[shape]; the file name itself may hold ':' only before the last two fields.
      const auto shape_colon = rest.rfind(':');
      const auto dtype_colon =
          shape_colon == std::string::npos ? std::string::npos : rest.rfind(':', shape_colon - 1);
      if (dtype_colon == std::string::npos)
        return ctx(InvalidArgument("an output is out:FILE.npy:DTYPE:[D0,D1,...], e.g. out:y.npy:f32:[1024]"));
      const std::string file = rest.substr(0, dtype_colon);
      const auto dtype = parse_dtype(rest.substr(dtype_colon + 1, shape_colon - dtype_colon - 1));
      if (!dtype || dtype_size(*dtype) == 0)
        return ctx(InvalidArgument("unknown or unsupported dtype '" +
                                   rest.substr(dtype_colon + 1, shape_colon - dtype_colon - 1) + "'"));
      auto shape = parse_shape(rest.substr(shape_colon + 1));
      if (!shape.ok()) return ctx(shape.status());
      auto dev = ex.allocate(device, *dtype, *shape);
      if (!dev.ok()) return ctx(dev.status());
      outputs.push_back({file, *dev});
      out.push_back(KernelArg::tensor(*dev));
    } else if (kind == "local") {
      auto bytes = memory::parse_byte_size(rest);
      if (!bytes.ok()) return ctx(bytes.status());
      out.push_back(KernelArg::local_memory(*bytes));
    } else {
      auto scalar = KernelArg::parse_scalar(spec);
      if (!scalar.ok())
        return ctx(InvalidArgument(scalar.status().message() +
                                   "; an argument is TYPE:VALUE, in:FILE.npy, inout:FILE.npy, "
                                   "out:FILE.npy:DTYPE:[SHAPE] or local:BYTES"));
      out.push_back(*scalar);
    }
  }
  return out;
}

void print_info(const kernels::KernelInfo& i) {
  std::printf("kernel:       %s\n", i.entry.c_str());
  std::printf("device:       %s\n", i.device.c_str());
  std::printf("target:       %s\n", i.target.c_str());
  std::printf("signature:    %s\n", i.signature.to_string().c_str());
  std::printf("registers:    %d per thread\n", i.registers);
  std::printf("shared:       %llu B static per block\n",
              static_cast<unsigned long long>(i.static_shared_bytes));
  std::printf("local:        %llu B per thread\n", static_cast<unsigned long long>(i.local_bytes));
  std::printf("max threads:  %d per block\n", i.max_threads_per_block);
  std::printf("preferred:    %d threads per block\n", i.preferred_block_size);
  std::printf("binary:       %s%s%s\n", memory::format_bytes(i.binary_bytes).c_str(),
              i.cache_file.empty() ? "" : ", ", i.cache_file.string().c_str());
  if (i.cache_hit)
    std::printf("compile:      cache hit\n");
  else
    std::printf("compile:      %.1f ms\n", i.compile_ms);
  std::printf("compile log:  %s\n", i.compile_log.empty() ? "(empty)" : ("\n" + i.compile_log).c_str());
}

int run_kernel(const KernelArgs& a) {
  auto source = read_source(a.file);
  if (!source.ok()) return fail(source.status());
  auto grid = kernels::parse_dim3(a.grid);
  if (!grid.ok()) return fail(grid.status().with_context("--grid"), 2);
  auto block = kernels::parse_dim3(a.block);
  if (!block.ok()) return fail(block.status().with_context("--block"), 2);
  const std::string device = default_device(a);
  KernelExecutor ex;
  if (Status s = ex.available(device); !s.ok()) return fail(s);
  auto handle = ex.load(*source, a.entry, device, kernel_options(a));
  if (!handle.ok()) return fail(handle.status());
  std::vector<Output> outputs;
  auto args = build_args(ex, device, a.args, outputs);
  if (!args.ok()) return fail(args.status());
  const auto t0 = std::chrono::steady_clock::now();
  Status s = ex.launch(*handle, *args, *grid, *block, a.shared);
  if (s.ok()) s = ex.synchronize(device);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) return fail(s);
  auto info = ex.info(*handle);
  std::printf("ran %s on %s: grid %s, block %s, %.3f ms (%s)\n", a.entry.c_str(), device.c_str(),
              grid->to_string().c_str(), block->to_string().c_str(), ms,
              info->cache_hit ? "cached binary" : "compiled now");
  for (const auto& o : outputs) {
    auto host = ex.copy_to_host(o.device);
    if (!host.ok()) return fail(host.status());
    if (Status w = write_npy(o.file, *host); !w.ok()) return fail(w);
    std::printf("wrote %s (%s %s)\n", o.file.c_str(), std::string(dtype_name(host->dtype())).c_str(),
                host->shape().to_string().c_str());
  }
  return 0;
}

int info_kernel(const KernelArgs& a) {
  auto source = read_source(a.file);
  if (!source.ok()) return fail(source.status());
  const std::string device = default_device(a);
  KernelExecutor ex;
  Status avail = ex.available(device);
  if (!avail.ok() && device.rfind("cuda:", 0) == 0) {
    // No GPU here: what NVRTC can tell without one (the binary, the log, the signature).
    auto sig = kernels::parse_signature(*source, a.entry);
    if (!sig.ok()) return fail(sig.status().with_context(a.file));
    kernels::CudaCompileOptions o;
    o.arch = a.arch.empty() ? "sm_90a" : a.arch;
    o.flags = a.flags;
    o.source_name = fs::path(a.file).filename().string();
    o.use_cache = !a.no_cache;
    auto bin = kernels::compile_cuda(*source, a.entry, o);
    if (!bin.ok()) return fail(bin.status());
    kernels::KernelInfo i;
    i.entry = a.entry;
    i.device = device + " (not loaded)";
    i.target = bin->arch + " (" + bin->compiler + ")";
    i.signature = *sig;
    i.binary_bytes = bin->binary.size();
    i.compile_log = bin->log;
    i.compile_ms = bin->compile_ms;
    i.cache_hit = bin->cache_hit;
    print_info(i);
    std::printf("note:         registers, shared/local memory and the thread limit need the GPU: %s\n",
                avail.message().c_str());
    return 0;
  }
  if (!avail.ok()) return fail(avail);
  auto handle = ex.load(*source, a.entry, device, kernel_options(a));
  if (!handle.ok()) return fail(handle.status());
  print_info(*ex.info(*handle));
  return 0;
}

int compile_kernel(const KernelArgs& a) {
  auto source = read_source(a.file);
  if (!source.ok()) return fail(source.status());
  const std::string ext = fs::path(a.output).extension().string();
  if (ext != ".cubin" && ext != ".ptx")
    return fail(InvalidArgument("-o must name a .cubin or a .ptx file, got '" + a.output + "'"), 2);
  std::string arch = a.arch;
  if (arch.empty()) {
    for (const auto& d : hw::detect_local().devices)
      if (d.family == hw::kFamilyCuda && arch.empty())
        if (auto r = kernels::cuda_arch_for(d); r.ok()) arch = *r;
    if (arch.empty())
      return fail(
          InvalidArgument("no NVIDIA GPU here to take the architecture from: pass --arch (e.g. sm_90a)"), 2);
  }
  kernels::CudaCompileOptions o;
  o.arch = arch;
  o.output = ext == ".ptx" ? kernels::CudaOutput::kPtx : kernels::CudaOutput::kCubin;
  o.flags = a.flags;
  o.source_name = fs::path(a.file).filename().string();
  o.use_cache = !a.no_cache;
  auto bin = kernels::compile_cuda(*source, a.entry, o);
  if (!bin.ok()) return fail(bin.status());
  if (Status s = write_file(a.output, bin->binary); !s.ok()) return fail(s);
  std::printf("wrote %s (%s, %s, entry symbol %s, %s)\n", a.output.c_str(), bin->arch.c_str(),
              memory::format_bytes(bin->binary.size()).c_str(), bin->lowered_name.c_str(),
              bin->cache_hit ? "cache hit" : "compiled now");
  if (!bin->log.empty()) std::fprintf(stderr, "%s\n", bin->log.c_str());
  return 0;
}

void common_options(CLI::App* cmd, KernelArgs& a) {
  cmd->add_option("file", a.file, "Kernel source: .cu (CUDA C++), .cpp or .c (CPU convention)")->required();
  cmd->add_option("--entry", a.entry, "The kernel function's name")->required();
  cmd->add_option("--flag", a.flags, "Extra compiler flag (repeatable): -DTILE=32, --use_fast_math");
  cmd->add_option("--arch", a.arch, "CUDA architecture (sm_90a, sm_86, ...); default: the GPU's");
  cmd->add_flag("--no-cache", a.no_cache, "Compile again instead of using the kernel cache");
}

}  // namespace

void register_kernel_command(CLI::App& app, int& exit_code) {
  auto* kernel = app.add_subcommand("kernel", "Compile, describe and run custom kernels (CUDA or CPU)");
  kernel->require_subcommand(1);

  auto run_args = std::make_shared<KernelArgs>();
  auto* run = kernel->add_subcommand("run", "Run a kernel once on .npy inputs and write .npy outputs");
  common_options(run, *run_args);
  run->add_option("--grid", run_args->grid, "Blocks: X[,Y,Z]")->capture_default_str();
  run->add_option("--block", run_args->block, "Threads per block: X[,Y,Z]")->capture_default_str();
  run->add_option(
      "--arg", run_args->args,
      "Argument in order (repeatable): f32:2.0, i32:7, in:x.npy, inout:x.npy, out:y.npy:f32:[1024], "
      "local:4096");
  run->add_option("--shared", run_args->shared, "Dynamic shared (local) memory per block, bytes");
  run->add_option("--device", run_args->device, "cpu or cuda:N; default: cuda:0 for .cu, cpu otherwise");
  run->callback([run_args, &exit_code] { exit_code = run_kernel(*run_args); });

  auto info_args = std::make_shared<KernelArgs>();
  auto* info =
      kernel->add_subcommand("info", "Compile/load a kernel and print its resources and compile log");
  common_options(info, *info_args);
  info->add_option("--device", info_args->device, "cpu or cuda:N; default: cuda:0 for .cu, cpu otherwise");
  info->callback([info_args, &exit_code] { exit_code = info_kernel(*info_args); });

  auto compile_args = std::make_shared<KernelArgs>();
  auto* compile =
      kernel->add_subcommand("compile", "Compile a CUDA kernel to a cubin or PTX file (no GPU needed)");
  common_options(compile, *compile_args);
  compile->add_option("-o,--output", compile_args->output, "OUT.cubin or OUT.ptx")->required();
  compile->callback([compile_args, &exit_code] { exit_code = compile_kernel(*compile_args); });
}

}  // namespace gantry::cli
