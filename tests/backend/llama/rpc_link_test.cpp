// RpcLink: the relay between ggml's RPC client and a server. Requests and answers pass through unchanged;
// when the server goes away (or speaks another version) the link counts a loss and answers ggml itself,
// always with the number of bytes ggml waits for, so that ggml never aborts the process.
#include "gantry/backend/llama/rpc_link.h"

#include <gtest/gtest.h>

#include <cstring>

#include "gantry/hw/rpc_wire.h"
#include "hw/fake_rpc_server.h"

namespace gantry::llama {
namespace {

using hw::rpc::Command;
using testing::FakeRpcServer;

constexpr std::chrono::milliseconds kWait{10000};

// A client of the link's relay, as ggml's dispatcher is.
hw::rpc::Socket connect_relay(const RpcLink& link) {
  const auto colon = link.relay_endpoint().find(':');
  auto s = hw::rpc::Socket::connect(link.relay_endpoint().substr(0, colon),
                                    static_cast<uint16_t>(std::stoi(link.relay_endpoint().substr(colon + 1))),
                                    kWait);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(*s) : hw::rpc::Socket();
}

hw::rpc::HelloResponse hello(hw::rpc::Socket& s) {
  hw::rpc::HelloRequest req;
  hw::rpc::HelloResponse rsp;
  EXPECT_TRUE(hw::rpc::call(s, Command::kHello, &req, sizeof req, &rsp, sizeof rsp, kWait).ok());
  return rsp;
}

hw::rpc::DeviceMemoryResponse memory(hw::rpc::Socket& s, uint32_t dev) {
  hw::rpc::DeviceMemoryResponse rsp;
  Status st = hw::rpc::call(s, Command::kGetDeviceMemory, &dev, sizeof dev, &rsp, sizeof rsp, kWait);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return rsp;
}

TEST(RpcLink, RelaysAndThenAnswersForALostServer) {
  FakeRpcServer::Options o;
  o.devices = {{7, 9}, {11, 13}};
  o.hang_up_after = 4;  // hello, device count, memory, memory: then the host is gone
  FakeRpcServer server(o);
  auto link = RpcLink::get({"127.0.0.1", server.port()});
  ASSERT_TRUE(link.ok()) << link.status().to_string();
  EXPECT_EQ((*link)->relay_endpoint().rfind("127.0.0.1:", 0), 0u);
  const uint64_t before = (*link)->losses();

  auto c = connect_relay(**link);
  EXPECT_EQ(hello(c).major, hw::rpc::kProtoMajor);
  uint32_t n = 0;
  ASSERT_TRUE(hw::rpc::call(c, Command::kDeviceCount, nullptr, 0, &n, sizeof n, kWait).ok());
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(memory(c, 1).free_mem, 11u);
  EXPECT_EQ(memory(c, 0).total_mem, 9u);
  EXPECT_TRUE((*link)->check(before).ok());

  // The server hangs up on the next request. ggml still gets answers of the sizes it waits for: the
  // remembered one for a query it made before, zeros for the rest, nothing for commands without one.
  EXPECT_EQ(memory(c, 1).free_mem, 11u);
  Status lost = (*link)->check(before);
  EXPECT_EQ(lost.code(), StatusCode::kUnavailable);
  EXPECT_NE(lost.message().find("127.0.0.1:" + std::to_string(server.port()) + " was lost"),
            std::string::npos)
      << lost.message();
  hw::rpc::AllocBufferRequest alloc{0, 1 << 20};
  hw::rpc::AllocBufferResponse buf{1, 1};
  ASSERT_TRUE(hw::rpc::call(c, Command::kAllocBuffer, &alloc, sizeof alloc, &buf, sizeof buf, kWait).ok());
  EXPECT_EQ(buf.remote_ptr, 0u);         // no buffer: ggml's allocation fails cleanly
  std::vector<uint8_t> big(3 << 20, 1);  // a large SET_TENSOR is read and dropped
  ASSERT_TRUE(hw::rpc::call(c, Command::kSetTensor, big.data(), big.size(), nullptr, 0, kWait).ok());
  hw::rpc::GetTensorRequest get;
  get.size = 4096;
  std::vector<uint8_t> back(4096, 1);
  ASSERT_TRUE(hw::rpc::call(c, Command::kGetTensor, &get, sizeof get, back.data(), back.size(), kWait).ok());
  EXPECT_EQ(back[0], 0);
  EXPECT_EQ(back[4095], 0);
  uint64_t align = 0;
  uint32_t dev0 = 0;
  ASSERT_TRUE(hw::rpc::call(c, Command::kGetAlignment, &dev0, sizeof dev0, &align, sizeof align, kWait).ok());
  EXPECT_EQ(align & (align - 1), 0u);  // a power of two, which ggml's allocator asserts
  EXPECT_GT(align, 0u);
  uint64_t ptr = 0x1000, base = 0;
  ASSERT_TRUE(hw::rpc::call(c, Command::kBufferGetBase, &ptr, sizeof ptr, &base, sizeof base, kWait).ok());
  EXPECT_NE(base, 0u);  // ggml_backend_buffer_get_base asserts a base
  EXPECT_EQ(base % 4096, 0u);
  EXPECT_EQ((*link)->losses(), before + 1);  // one loss per lost connection

  // A new connection (a reload) reaches the server afresh.
  auto again = connect_relay(**link);
  EXPECT_EQ(hello(again).major, hw::rpc::kProtoMajor);
  EXPECT_EQ(memory(again, 0).free_mem, 7u);
  EXPECT_EQ((*link)->losses(), before + 1);
}

TEST(RpcLink, AServerThatIsDownOrOfAnotherVersionIsALossNotAnAbort) {
  uint16_t port = 0;
  {
    FakeRpcServer gone;
    port = gone.port();
  }
  auto down = RpcLink::get({"127.0.0.1", port});
  ASSERT_TRUE(down.ok());
  const uint64_t before = (*down)->losses();
  auto c = connect_relay(**down);
  const auto h = hello(c);  // made up: ggml's handshake must not fail (it would abort)
  EXPECT_EQ(h.major, hw::rpc::kProtoMajor);
  EXPECT_EQ(h.minor, hw::rpc::kProtoMinor);
  EXPECT_GT((*down)->losses(), before);
  EXPECT_NE((*down)->last_loss().find("cannot connect"), std::string::npos) << (*down)->last_loss();

  FakeRpcServer::Options o;
  o.major = 6;
  FakeRpcServer old(o);
  auto v6 = RpcLink::get({"127.0.0.1", old.port()});
  ASSERT_TRUE(v6.ok());
  auto c6 = connect_relay(**v6);
  EXPECT_EQ(hello(c6).major, hw::rpc::kProtoMajor);
  Status st = (*v6)->check(0);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("speaks RPC protocol 6.0.0"), std::string::npos) << st.message();
}

TEST(RpcLink, OneLinkPerServer) {
  FakeRpcServer server;
  auto a = RpcLink::get({"127.0.0.1", server.port()});
  auto b = RpcLink::get({"127.0.0.1", server.port()});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
}

}  // namespace
}  // namespace gantry::llama
