// ggml's RPC wire format (llama.cpp's rpc-server and `gantry rpc-server` speak it), mirrored from
// ggml/src/ggml-rpc/ggml-rpc.cpp at the pinned commit (de3ff815, protocol 7.0.0), and a blocking TCP socket
// with timeouts to speak it. ggml does not install that file's structures; the sizes below are checked
// against it by static_assert where ggml states them (rpc_tensor: a multiple of 8; HELLO is command 14).
//
//   request : | command (1 byte) | payload size (8 bytes, little-endian) | payload |
//   response: | payload size (8 bytes) | payload |          (only the commands response_bytes() names)
//
// A client sends one request at a time and reads its response (if any) before the next: the stream is in
// lockstep, which is what lets a relay (backend/llama/rpc_link.h) follow it. The server serves one client
// connection at a time, has no authentication and no encryption.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::hw::rpc {

static_assert(std::endian::native == std::endian::little, "ggml's RPC protocol is little-endian raw structs");

inline constexpr uint8_t kProtoMajor = 7;
inline constexpr uint8_t kProtoMinor = 0;
inline constexpr uint8_t kProtoPatch = 0;

enum class Command : uint8_t {
  kAllocBuffer = 0,
  kGetAlignment,
  kGetMaxSize,
  kBufferGetBase,
  kFreeBuffer,
  kBufferClear,
  kSetTensor,
  kSetTensorHash,
  kGetTensor,
  kCopyTensor,
  kGraphCompute,
  kGetDeviceMemory,
  kInitTensor,
  kGetAllocSize,
  kHello,
  kDeviceCount,
  kGraphRecompute,
  kMemsetTensor,
  kCount,  // commands are below this
};
static_assert(static_cast<int>(Command::kHello) == 14, "RPC_CMD_HELLO must be always 14");

// ggml's limits the serialised tensor is built on (ggml.h: GGML_MAX_DIMS, GGML_MAX_OP_PARAMS, GGML_MAX_SRC,
// GGML_MAX_NAME).
inline constexpr size_t kMaxDims = 4, kMaxOpParams = 64, kMaxSrc = 10, kMaxName = 64;
inline constexpr uint32_t kTypeF32 = 0;  // GGML_TYPE_F32

#pragma pack(push, 1)
struct Tensor {  // rpc_tensor
  uint64_t id = 0;
  uint32_t type = 0;
  uint64_t buffer = 0;
  uint32_t ne[kMaxDims] = {};
  uint32_t nb[kMaxDims] = {};
  uint32_t op = 0;
  int32_t op_params[kMaxOpParams / sizeof(int32_t)] = {};
  int32_t flags = 0;
  uint64_t src[kMaxSrc] = {};
  uint64_t view_src = 0;
  uint64_t view_offs = 0;
  uint64_t data = 0;
  char name[kMaxName] = {};
  int32_t use_count = 0;
};
inline constexpr size_t kConnCapsSize = 24;  // RPC_CONN_CAPS_SIZE
struct HelloRequest {
  uint8_t conn_caps[kConnCapsSize] = {};
};
struct HelloResponse {
  uint8_t major = 0, minor = 0, patch = 0, padding = 0;
  uint8_t conn_caps[kConnCapsSize] = {};
};
struct AllocBufferRequest {
  uint32_t device = 0;
  uint64_t size = 0;
};
struct AllocBufferResponse {
  uint64_t remote_ptr = 0;
  uint64_t remote_size = 0;
};
struct GetTensorRequest {
  Tensor tensor;
  uint64_t offset = 0;
  uint64_t size = 0;
};
struct DeviceMemoryResponse {
  uint64_t free_mem = 0;
  uint64_t total_mem = 0;
};
#pragma pack(pop)
static_assert(sizeof(Tensor) == 296 && sizeof(Tensor) % 8 == 0, "rpc_tensor at protocol 7.0.0");
static_assert(sizeof(HelloResponse) == 28 && sizeof(AllocBufferRequest) == 12);

// Size of the response a client waits for after `command` with this request payload; nullopt when the
// command has none (FREE_BUFFER, BUFFER_CLEAR, SET_TENSOR, GRAPH_COMPUTE, ...). GET_TENSOR's is the size its
// request asks for (0 when the payload is too short to say). Unknown commands: nullopt.
std::optional<uint64_t> response_bytes(uint8_t command, std::string_view request_payload);

// "7.0.0"
std::string version_text(uint8_t major, uint8_t minor, uint8_t patch);
// ggml's rule (negotiate_hello): the majors must match and the server's minor must not be newer.
bool version_compatible(const HelloResponse& r);

// A connected (or listening) TCP socket; closes on destruction. Every call has a deadline: none blocks for
// longer than the timeout given to it. SIGPIPE is never raised (MSG_NOSIGNAL).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  // Resolves `host` (name or address) and connects with TCP_NODELAY. Unavailable with the reason
  // ("connection refused", "timed out after 3000 ms", "no such host").
  static Result<Socket> connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);
  // Listens on host:port (port 0: a free one). InvalidArgument for an address that is not local.
  static Result<Socket> listen(const std::string& host, uint16_t port);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  uint16_t local_port() const;
  // Sends / receives exactly `n` bytes. Unavailable when the peer closed, reset or timed out (the message
  // says which).
  Status send_all(const void* data, size_t n, std::chrono::milliseconds timeout);
  Status recv_all(void* data, size_t n, std::chrono::milliseconds timeout);
  // Blocking variants without a deadline (a relay waiting for its client's next request).
  Status send_all(const void* data, size_t n);
  Status recv_all(void* data, size_t n);
  // Detects a dead peer of an idle connection within about idle + 3 x interval (TCP keepalive).
  void keepalive(std::chrono::seconds idle, std::chrono::seconds interval);
  // Wakes a thread blocked in recv/accept on this socket (shutdown(2)); the fd stays open.
  void shutdown();
  // Accepts one connection (blocking). Unavailable once shutdown() was called.
  Result<Socket> accept();

 private:
  int fd_ = -1;
};

// One request/response exchange (the client side of ggml's send_rpc_cmd): sends `command` with `payload`
// and, when `response` is not null, reads a response that must be exactly `response_size` bytes.
Status call(Socket& s, Command command, const void* payload, size_t payload_size, void* response,
            size_t response_size, std::chrono::milliseconds timeout);

}  // namespace gantry::hw::rpc
