// libFuzzer target: what Gantry makes of an RPC server's answers (ggml's RPC wire format,
// gantry/hw/rpc_wire.h) — the bytes a llama.cpp rpc-server, or anything listening where one was named,
// sends back. The answers are written into one end of a socketpair and the real client code reads them
// from the other: rpc::call (one exchange) and the whole probe (gantry/hw/rpc.h: hello, device count,
// memory, link timing), whose result is compared with a plain reading of the same bytes. Also
// rpc::response_bytes over the requests a relay forwards. Input: byte 0 picks what runs; the rest is the
// server's answers (or, for response_bytes, a command byte and its payload). Any input must end in a
// result or an error naming the server: never a crash, a hang, or a value the bytes did not state.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "gantry/hw/rpc.h"
#include "gantry/hw/rpc_wire.h"

namespace {

namespace hw = gantry::hw;
namespace rpc = gantry::hw::rpc;

// Larger inputs could fill the socketpair's buffer before the client reads (a write would block).
constexpr size_t kMaxInput = 64 * 1024;
constexpr std::chrono::milliseconds kTimeout{2000};  // never reached: the answers end in EOF

// A connection whose peer has sent `answers` and then shut its side down; the peer end (which takes in
// the client's requests) stays open in `peer` until the exchange is over.
struct Answering {
  rpc::Socket client;
  rpc::Socket peer;
};
Answering answering(std::string_view answers) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  Answering a{rpc::Socket(fds[0]), rpc::Socket(fds[1])};
  size_t off = 0;
  while (off < answers.size()) {
    const ssize_t k = ::write(fds[1], answers.data() + off, answers.size() - off);
    if (k <= 0) std::abort();
    off += static_cast<size_t>(k);
  }
  ::shutdown(fds[1], SHUT_WR);
  return a;
}

// ggml's framing read plainly: | size (8 bytes) | payload |, the size being exactly `want`.
struct Frames {
  std::string_view rest;
  bool next(size_t want, void* out) {
    uint64_t got = 0;
    if (rest.size() < sizeof got) return false;
    std::memcpy(&got, rest.data(), sizeof got);
    if (got != want || rest.size() - sizeof got < want) return false;
    std::memcpy(out, rest.data() + sizeof got, want);
    rest.remove_prefix(sizeof got + want);
    return true;
  }
};

// What a probe without link timing must conclude from `answers`: nullopt when it must fail.
std::optional<std::vector<hw::RpcDeviceMemory>> expected_devices(std::string_view answers) {
  Frames f{answers};
  rpc::HelloResponse hello;
  uint32_t n = 0;
  if (!f.next(sizeof hello, &hello) || !rpc::version_compatible(hello)) return std::nullopt;
  if (!f.next(sizeof n, &n) || n == 0 || n > 64) return std::nullopt;
  std::vector<hw::RpcDeviceMemory> devices;
  for (uint32_t i = 0; i < n; ++i) {
    rpc::DeviceMemoryResponse m;
    if (!f.next(sizeof m, &m)) return std::nullopt;
    devices.push_back({m.free_mem, m.total_mem});
  }
  return devices;
}

void fuzz_probe(std::string_view answers, bool measure_link) {
  const hw::RpcEndpoint endpoint{"fuzz.invalid", 50052};
  hw::RpcProbeOptions o;
  o.timeout = kTimeout;
  o.measure_link = measure_link;
  o.bandwidth_bytes = 4096;
  Answering a = answering(answers);
  auto info = hw::probe_rpc_connection(std::move(a.client), endpoint, o);
  if (!info.ok()) {
    if (info.status().message().find(endpoint.text()) == std::string::npos) std::abort();
  } else {
    if (info->devices.empty() || info->devices.size() > 64 || info->endpoint != endpoint) std::abort();
    if (!info->protocol.starts_with("7.0.")) std::abort();
    if (measure_link != info->round_trip_s.has_value()) std::abort();
  }
  if (measure_link) return;
  const auto want = expected_devices(answers);
  if (want.has_value() != info.ok()) std::abort();
  if (!want) return;
  if (want->size() != info->devices.size()) std::abort();
  for (size_t i = 0; i < want->size(); ++i)
    if ((*want)[i].free_bytes != info->devices[i].free_bytes ||
        (*want)[i].total_bytes != info->devices[i].total_bytes)
      std::abort();
}

// One exchange: bytes 0 the command, 1-2 the response size expected; the rest is the answer.
void fuzz_call(std::string_view in) {
  if (in.size() < 3) return;
  const auto command =
      static_cast<rpc::Command>(static_cast<uint8_t>(in[0]) % static_cast<int>(rpc::Command::kCount));
  const size_t want = static_cast<uint8_t>(in[1]) | size_t{static_cast<uint8_t>(in[2])} << 8;
  const std::string_view answer = in.substr(3);
  std::vector<uint8_t> response(want + 1, 0xAA);
  Answering a = answering(answer);
  const uint32_t payload = 7;
  const auto s = rpc::call(a.client, command, &payload, sizeof payload, response.data(), want, kTimeout);
  std::vector<uint8_t> expect(want + 1, 0xAA);
  Frames f{answer};
  if (f.next(want, expect.data()) != s.ok()) std::abort();
  if (!s.ok() && s.message().empty()) std::abort();
  if (s.ok() && response != expect) std::abort();  // exactly the payload, nothing written past it
}

void fuzz_response_bytes(std::string_view in) {
  if (in.empty()) return;
  const uint8_t command = static_cast<uint8_t>(in[0]);
  const std::string_view payload = in.substr(1);
  const auto n = rpc::response_bytes(command, payload);
  if (command >= static_cast<uint8_t>(rpc::Command::kCount) && n) std::abort();
  if (command == static_cast<uint8_t>(rpc::Command::kGetTensor)) {
    uint64_t size = 0;
    if (payload.size() >= sizeof(rpc::GetTensorRequest))
      std::memcpy(&size, payload.data() + offsetof(rpc::GetTensorRequest, size), sizeof size);
    if (n != size) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > kMaxInput) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0:
      fuzz_probe(rest, /*measure_link=*/false);
      break;
    case 1:
      fuzz_probe(rest, /*measure_link=*/true);
      break;
    case 2:
      fuzz_call(rest);
      break;
    default:
      fuzz_response_bytes(rest);
      break;
  }
  return 0;
}
