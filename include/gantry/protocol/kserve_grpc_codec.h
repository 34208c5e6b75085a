// KServe v2 gRPC codec: pure functions between the Open Inference Protocol's protobuf messages
// (proto/grpc_predict_v2.proto) and tensors, and from gantry Status to gRPC status (no I/O).
//
// It produces and consumes the REST codec's types (kserve::InferRequest, NamedTensor) so both front
// ends share validation (kserve::check_shape) and the raw byte layout (kserve::tensor_from_bytes /
// append_tensor_bytes: little-endian, row-major; BOOL one byte; BYTES a 4-byte length then the bytes).
//
// Choices where the protocol leaves room:
// - A request gives its inputs either all as typed `contents` or all as `raw_input_contents` (one
//   entry per input, in the order of `inputs`), as the specification says; mixing is refused.
// - Typed contents use exactly the field of the tensor's datatype (int_contents for INT8/16/32,
//   uint_contents for UINT8/16/32, ...), with exactly as many elements as the shape needs; values out of
//   a narrow type's range are refused. FP16/BF16 have no typed field: send them raw.
// - The response answers in the request's form: raw_output_contents when the request sent raw inputs
//   (as Triton's clients expect), typed contents otherwise, except that FP16/BF16 outputs force raw for
//   the whole response (the specification does not allow mixing).
#pragma once

#include <grpcpp/support/status.h>

#include <memory>
#include <span>
#include <string_view>

#include "gantry/backend/model.h"
#include "gantry/core/status.h"
#include "gantry/protocol/kserve_codec.h"
#include "grpc_predict_v2.pb.h"

namespace gantry::protocol::kserve_grpc {

// gRPC status code for a gantry Status: InvalidArgument/Corrupt/Unsupported INVALID_ARGUMENT,
// NotFound NOT_FOUND, ResourceExhausted RESOURCE_EXHAUSTED, Unavailable UNAVAILABLE,
// FailedPrecondition FAILED_PRECONDITION, Cancelled CANCELLED, IoError/Internal INTERNAL.
grpc::StatusCode code_for(StatusCode code);
grpc::Status to_grpc(const Status& status);
// The HTTP status the same failure gets over HTTP (for the shared request metrics' "code" label).
int http_status_for_grpc(grpc::StatusCode code);

// Parses and validates one ModelInferRequest against `model`. Inputs come back in the model's input
// order. With `request_owner` (which keeps `request` alive and unmodified), raw numeric inputs whose
// bytes are aligned are zero-copy: they point into `request` and share ownership of `request_owner`
// (see kserve::tensor_from_bytes); without it every input is copied. Errors are InvalidArgument naming
// the input and what was expected.
Result<kserve::InferRequest> parse_infer_request(const inference::ModelInferRequest& request,
                                                 const backend::ModelMetadata& model,
                                                 std::shared_ptr<const void> request_owner = nullptr);

// Fills `response` for `request` (its requested outputs, in its order; all of `outputs` when none were
// requested). Internal when a requested output is missing or not in host memory.
Status encode_infer_response(std::string_view model_name, const kserve::InferRequest& request,
                             std::span<const NamedTensor> outputs, inference::ModelInferResponse& response);

// ModelMetadataResponse for `md` (dynamic dimensions as -1; platform as over HTTP).
void model_metadata(std::string_view name, const backend::ModelMetadata& md,
                    inference::ModelMetadataResponse& response);

}  // namespace gantry::protocol::kserve_grpc
