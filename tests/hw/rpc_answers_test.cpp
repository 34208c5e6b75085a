// The RPC probe over a connection handed to it (probe_rpc_connection), fed scripted server answers through a
// socketpair: what well-formed answers give, and how each malformed one is refused by name. The same bytes
// drive fuzz/rpc_wire_fuzz.cpp.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gantry/hw/rpc.h"
#include "gantry/hw/rpc_wire.h"

namespace gantry::hw {
namespace {

const RpcEndpoint kServer{"10.0.0.9", 50052};

// | size (8 bytes) | payload | for each answer.
template <class T>
void frame(std::string& out, const T& payload, uint64_t size = sizeof(T)) {
  out.append(reinterpret_cast<const char*>(&size), sizeof size);
  out.append(reinterpret_cast<const char*>(&payload), sizeof payload);
}

std::string hello(uint8_t major = rpc::kProtoMajor, uint8_t minor = rpc::kProtoMinor) {
  rpc::HelloResponse h;
  h.major = major;
  h.minor = minor;
  std::string out;
  frame(out, h);
  return out;
}

std::string devices(uint32_t n) {
  std::string out;
  frame(out, n);
  for (uint32_t i = 0; i < n; ++i) frame(out, rpc::DeviceMemoryResponse{(i + 1) * 100ull, (i + 1) * 200ull});
  return out;
}

// Probes (without link timing) a server that answers `answers` and then closes its side.
Result<RpcServerInfo> probe(const std::string& answers) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  rpc::Socket peer(fds[1]);
  EXPECT_EQ(::write(fds[1], answers.data(), answers.size()), static_cast<ssize_t>(answers.size()));
  ::shutdown(fds[1], SHUT_WR);
  RpcProbeOptions o;
  o.measure_link = false;
  o.timeout = std::chrono::milliseconds(60000);  // never reached: the answers end in EOF
  return probe_rpc_connection(rpc::Socket(fds[0]), kServer, o);
}

TEST(RpcAnswers, WellFormedAnswersGiveTheDevices) {
  auto info = probe(hello() + devices(2));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->protocol, "7.0.0");
  ASSERT_EQ(info->devices.size(), 2u);
  EXPECT_EQ(info->devices[1].free_bytes, 200u);
  EXPECT_EQ(info->devices[1].total_bytes, 400u);
  EXPECT_FALSE(info->round_trip_s.has_value());
}

TEST(RpcAnswers, MalformedAnswersAreRefusedByName) {
  struct Case {
    std::string answers;
    StatusCode code;
    std::string says;
  };
  std::string long_hello;
  frame(long_hello, rpc::HelloResponse{}, 29);
  std::string huge_count;
  frame(huge_count, uint32_t{7}, UINT64_MAX);
  const Case cases[] = {
      {"", StatusCode::kUnavailable, "closed by the other side"},
      {long_hello, StatusCode::kUnavailable, "answered 29 bytes where 28 were expected"},
      {hello().substr(0, 20), StatusCode::kUnavailable, "did not complete the hello"},
      {hello(6, 0) + devices(1), StatusCode::kFailedPrecondition, "speaks RPC protocol 6.0.0"},
      {hello(7, 1) + devices(1), StatusCode::kFailedPrecondition, "speaks RPC protocol 7.1.0"},
      {hello() + huge_count, StatusCode::kUnavailable, "where 4 were expected"},
      {hello() + devices(0), StatusCode::kFailedPrecondition, "serves no device"},
      {hello() + devices(65), StatusCode::kFailedPrecondition, "65 devices"},
      {hello() + devices(3).substr(0, 12 + 24 + 10), StatusCode::kUnavailable,
       "asking for device 1's memory"},
  };
  for (const auto& c : cases) {
    auto info = probe(c.answers);
    ASSERT_FALSE(info.ok()) << c.says;
    EXPECT_EQ(info.status().code(), c.code) << info.status().to_string();
    const std::string& m = info.status().message();
    EXPECT_NE(m.find("10.0.0.9:50052"), std::string::npos) << m;
    EXPECT_NE(m.find(c.says), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace gantry::hw
