// The gRPC front end labels its metrics with the HTTP status the same failure gets over HTTP: the codec's
// gRPC -> HTTP table (protocol/kserve_grpc_codec.h) must agree with the server's Status -> HTTP rule.
#include <gtest/gtest.h>

#include "gantry/protocol/kserve_grpc_codec.h"
#include "server/server_state.h"

namespace gantry::server {
namespace {
namespace kg = protocol::kserve_grpc;

TEST(GrpcHttpStatus, TheMetricsCodeLabelIsWhatTheFailureIsOverHttp) {
  for (auto code : {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kResourceExhausted,
                    StatusCode::kUnavailable, StatusCode::kInternal})
    EXPECT_EQ(kg::http_status_for_grpc(kg::code_for(code)), http_status_for(Status(code, "")));
}

}  // namespace
}  // namespace gantry::server
