// gantry rpc-server [--host 127.0.0.1] [--port 50052] [--device CPU,...] [--threads N] [--cache DIR]
//                   [--memory SIZE] [--insecure-expose-network]
//   Serves this machine's devices to other hosts over ggml's RPC protocol (llama.cpp's rpc-server does the
//   same), so that `gantry serve|run|plan|bench --rpc HOST:PORT` spreads one model over several hosts.
//   The protocol has no authentication and no encryption: loopback only unless --insecure-expose-network.
//   Runs until SIGINT/SIGTERM, then exits 0 (the client it served sees its connection closed: the protocol
//   has no way to hand a client over, so its model fails and is reloaded elsewhere).
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "gantry/backend/llama/rpc_server.h"
#include "gantry/memory/budget.h"

namespace gantry::cli {
namespace {

struct RpcServerArgs {
  llama::RpcServerOptions options;
  std::string devices;
  std::string memory;
  bool insecure_expose_network = false;
};

bool loopback(const std::string& host) { return host.rfind("127.", 0) == 0; }

int rpc_server(RpcServerArgs& a) {
  auto& o = a.options;
  if (o.host == "localhost") o.host = "127.0.0.1";
  if (!loopback(o.host)) {
    if (!a.insecure_expose_network) {
      std::cerr << "gantry rpc-server: --host " << o.host
                << " is not a loopback address. ggml's RPC protocol has no authentication and no encryption: "
                   "anyone who reaches the port can read and overwrite this machine's device memory and run "
                   "computations on it. Bind it only on a private network or behind a tunnel (ssh -L, "
                   "WireGuard), and say so with --insecure-expose-network.\n";
      return 2;
    }
    std::cerr << "gantry rpc-server: WARNING: serving on " << o.host << ":" << o.port
              << " (--insecure-expose-network): the RPC protocol has no authentication and no encryption; "
                 "anyone who reaches this port controls the served devices. Use a private network or a "
                 "tunnel.\n";
  }
  if (!a.devices.empty()) {
    size_t start = 0;
    while (start <= a.devices.size()) {
      size_t end = a.devices.find(',', start);
      if (end == std::string::npos) end = a.devices.size();
      if (end > start) o.devices.push_back(a.devices.substr(start, end - start));
      start = end + 1;
    }
  }
  if (!a.memory.empty()) {
    auto m = memory::parse_byte_size(a.memory);
    if (!m.ok() || *m == 0) {
      std::cerr << "gantry rpc-server: --memory: "
                << (m.ok() ? std::string("must be more than 0") : m.status().message()) << "\n";
      return 2;
    }
    o.memory_bytes = *m;
  }
  auto devices = llama::served_devices(o);
  if (!devices.ok()) {
    std::cerr << "gantry rpc-server: " << devices.status().message() << "\n";
    return 2;
  }
  if (Status s = llama::check_rpc_server(o); !s.ok()) {
    std::cerr << "gantry rpc-server: " << s.message() << "\n";
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  // SIGINT/SIGTERM end the process from this thread; the server thread never sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  std::cout << "gantry rpc-server: serving on " << o.host << ":" << o.port << ":";
  for (const auto& d : *devices) {
    std::cout << fmt::format(" {} ({}, {:.0f} MiB free of {:.0f} MiB)", d.name, d.description,
                             static_cast<double>(d.free_bytes) / (1 << 20),
                             static_cast<double>(d.total_bytes) / (1 << 20));
  }
  std::cout << std::endl;
  std::thread server([o] {
    Status s = llama::run_rpc_server(o);
    std::cerr << "gantry rpc-server: " << s.message() << std::endl;
    std::_Exit(s.code() == StatusCode::kInvalidArgument ? 2 : 1);
  });
  server.detach();
  int sig = 0;
  sigwait(&stop, &sig);
  std::cerr << "gantry rpc-server: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": stopped" << std::endl;
  std::cout.flush();
  std::_Exit(0);  // ggml's accept loop cannot be stopped; nothing of ours needs tearing down
}

}  // namespace

void register_rpc_server_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<RpcServerArgs>();
  auto* cmd = app.add_subcommand(
      "rpc-server",
      "Serve this machine's devices to other hosts over ggml's RPC protocol (one model over several hosts: "
      "--rpc on serve, run, plan, bench)");
  cmd->add_option("--host", a->options.host,
                  "IPv4 address to listen on (default 127.0.0.1; others need --insecure-expose-network)");
  cmd->add_option("--port", a->options.port, "Port (default 50052)")->check(CLI::Range(1, 65535));
  cmd->add_option(
      "--device", a->devices,
      "ggml devices to serve, comma-separated (CPU, CUDA0, ...; default: the GPUs, else the CPU)");
  cmd->add_option("--threads", a->options.threads, "CPU threads (default: half the hardware threads)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--cache", a->options.cache_dir,
                  "Keep tensors clients send in this directory, so weights sent again are skipped");
  cmd->add_option("--memory", a->memory,
                  "Memory each served device reports (e.g. 8GiB): what clients plan onto it at most");
  cmd->add_flag("--insecure-expose-network", a->insecure_expose_network,
                "Allow a non-loopback --host: the RPC protocol has no authentication or encryption");
  cmd->callback([a, &exit_code] { exit_code = rpc_server(*a); });
}

}  // namespace gantry::cli
