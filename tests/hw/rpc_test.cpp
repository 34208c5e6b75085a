// RPC servers as registry devices: endpoint parsing, the probe against a fake server (devices, memory, link
// measurements), and the errors that must name the server: down, busy, another protocol version.
#include "gantry/hw/rpc.h"

#include <gtest/gtest.h>

#include "gantry/hw/registry_json.h"
#include "hw/fake_rpc_server.h"

namespace gantry::hw {
namespace {

using testing::FakeRpcServer;

TEST(RpcEndpoints, ParseListsAndRefuseWhatGgmlCannotUse) {
  auto one = parse_rpc_endpoint(" 10.0.0.2:50052 ");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(one->host, "10.0.0.2");
  EXPECT_EQ(one->port, 50052);
  EXPECT_EQ(one->text(), "10.0.0.2:50052");

  auto list = parse_rpc_endpoints(std::vector<std::string>{"a:1,b:2", "c:3"});
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[2].text(), "c:3");

  for (const char* bad : {"", "host", ":50052", "host:", "host:0", "host:65536", "host:12x", "::1:50052"}) {
    EXPECT_EQ(parse_rpc_endpoint(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto twice = parse_rpc_endpoints("a:1,a:1");
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("named twice"), std::string::npos);
  EXPECT_EQ(parse_rpc_endpoints(std::vector<std::string>{}).status().code(), StatusCode::kInvalidArgument);
}

TEST(RpcProbe, ReadsDevicesMemoryAndTheLink) {
  FakeRpcServer::Options o;
  o.devices = {{1ull << 30, 2ull << 30}, {5ull << 30, 8ull << 30}};
  FakeRpcServer server(o);
  ASSERT_NE(server.port(), 0);
  RpcProbeOptions po;
  po.bandwidth_bytes = 1 << 20;
  auto info = probe_rpc_server({"127.0.0.1", server.port()}, po);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->protocol, "7.0.0");
  ASSERT_EQ(info->devices.size(), 2u);
  EXPECT_EQ(info->devices[1].free_bytes, 5ull << 30);
  EXPECT_EQ(info->devices[1].total_bytes, 8ull << 30);
  ASSERT_TRUE(info->round_trip_s.has_value());
  EXPECT_GT(*info->round_trip_s, 0);
  ASSERT_TRUE(info->upload_bytes_per_s.has_value());
  EXPECT_GT(*info->upload_bytes_per_s, 0u);
  EXPECT_GT(info->download_bytes_per_s.value_or(0), 0u);

  // As registry devices, after the ones already there; and through JSON and back unchanged.
  Registry r;
  r.devices.push_back(Device{});
  r.devices[0].id = "cpu:0";
  r.devices[0].kind = DeviceKind::kCpu;
  ASSERT_TRUE(add_rpc_devices(r, {{"127.0.0.1", server.port()}}, po).ok());
  ASSERT_EQ(r.devices.size(), 3u);
  const Device& d = r.devices[2];
  EXPECT_EQ(d.id, "rpc:1");
  EXPECT_EQ(d.kind, DeviceKind::kRemote);
  EXPECT_EQ(d.family, "rpc");
  EXPECT_EQ(memory_device_id(d), "rpc:1");
  ASSERT_TRUE(d.remote.has_value());
  EXPECT_EQ(d.remote->endpoint, "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(d.remote->device_index, 1);
  EXPECT_EQ(d.memory_free_bytes, 5ull << 30);
  auto back = registry_from_json(registry_to_json(r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->devices[2], d);
}

TEST(RpcProbe, AServerThatIsDownIsNamed) {
  uint16_t port = 0;
  {
    FakeRpcServer gone;  // a port that was free a moment ago
    port = gone.port();
  }
  auto info = probe_rpc_server({"127.0.0.1", port});
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(info.status().message().find("127.0.0.1:" + std::to_string(port) + " is not reachable"),
            std::string::npos)
      << info.status().message();
}

TEST(RpcProbe, AnotherProtocolVersionIsRefusedByName) {
  FakeRpcServer::Options o;
  o.major = 6;
  o.minor = 1;
  FakeRpcServer server(o);
  auto info = probe_rpc_server({"127.0.0.1", server.port()});
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = info.status().message();
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << m;
  EXPECT_NE(m.find("speaks RPC protocol 6.1.0"), std::string::npos) << m;
  EXPECT_NE(m.find("7.0.0"), std::string::npos) << m;

  // A newer minor is refused too (ggml's rule); an older one is accepted.
  FakeRpcServer::Options newer;
  newer.minor = 1;
  FakeRpcServer n(newer);
  EXPECT_EQ(probe_rpc_server({"127.0.0.1", n.port()}).status().code(), StatusCode::kFailedPrecondition);
}

TEST(RpcProbe, ABusyServerIsNamedAfterTheTimeout) {
  FakeRpcServer::Options o;
  o.never_answer = true;
  FakeRpcServer server(o);
  RpcProbeOptions po;
  po.timeout = std::chrono::milliseconds(200);
  auto info = probe_rpc_server({"127.0.0.1", server.port()}, po);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(info.status().message().find("serves one client at a time"), std::string::npos)
      << info.status().message();
}

TEST(RpcWire, ResponseSizesFollowTheCommand) {
  using rpc::Command;
  EXPECT_EQ(rpc::response_bytes(static_cast<uint8_t>(Command::kHello), ""), 28u);
  EXPECT_EQ(rpc::response_bytes(static_cast<uint8_t>(Command::kDeviceCount), ""), 4u);
  EXPECT_FALSE(rpc::response_bytes(static_cast<uint8_t>(Command::kSetTensor), "").has_value());
  EXPECT_FALSE(rpc::response_bytes(static_cast<uint8_t>(Command::kGraphCompute), "").has_value());
  rpc::GetTensorRequest req;
  req.size = 12345;
  const std::string payload(reinterpret_cast<const char*>(&req), sizeof req);
  EXPECT_EQ(rpc::response_bytes(static_cast<uint8_t>(Command::kGetTensor), payload), 12345u);
  EXPECT_FALSE(rpc::response_bytes(200, "").has_value());
}

}  // namespace
}  // namespace gantry::hw
