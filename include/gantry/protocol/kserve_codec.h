// KServe v2 / Open Inference Protocol REST codec: pure functions between HTTP bodies and tensors (no I/O).
//
// Covers the required REST API (inference request/response, model metadata, error object) and the binary
// tensor data extension: a body may be a JSON header of Inference-Header-Content-Length bytes followed by
// raw tensor bytes, little-endian, row-major; BOOL is one byte (0/1); a BYTES element is a 4-byte
// little-endian length then its bytes.
//
// Choices where the protocol leaves room (all documented here so a client can rely on them):
// - Binary input data follows the JSON header in the order the inputs appear in the request's "inputs"
//   array (the extension's rule), whatever the model's order; parsed inputs come back in model order.
// - An input gives either "data" or parameters.binary_data_size, not both.
// - JSON "data" may be flat or nested (row-major, nested no deeper than the shape's rank). Integer
//   dtypes take integers (or integral numbers such as 3.0) within the dtype's range; float dtypes take
//   any number and reject a finite value that overflows the dtype; FP16/BF16 round to nearest even.
//   JSON has no NaN/Infinity, so such inputs must be sent as binary data.
// - Non-finite float outputs are written as the bare tokens NaN, Infinity and -Infinity, as Triton does
//   (rapidjson's kWriteNanAndInfFlag). Python's json module and Triton's clients read them; strict JSON
//   parsers do not, so clients that need strict JSON request binary outputs.
// - BYTES outputs written as JSON must be valid UTF-8 (JSON strings are text); otherwise the encoder
//   fails and says to request that output with "binary_data": true.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/model.h"
#include "gantry/core/dtype.h"
#include "gantry/core/status.h"
#include "gantry/core/tensor.h"

namespace gantry::protocol::kserve {

// Protocol datatype name: "FP32", "FP16", "BF16", "FP64", "INT8".."INT64", "UINT8".."UINT64", "BOOL",
// "BYTES" (DType::kString).
std::string_view datatype_name(DType t);
// Inverse of datatype_name (case-sensitive, as the protocol says); nullopt for anything else.
std::optional<DType> parse_datatype(std::string_view name);

// Pieces the gRPC front end shares (its raw_input_contents / raw_output_contents use the binary
// extension's byte layout).

// InvalidArgument unless `got` has the rank of `info` and matches each of its fixed dimensions.
Status check_shape(const Shape& got, const backend::TensorInfo& info);
// A tensor of `dtype` and `shape` from its little-endian, row-major bytes (BYTES: per element a 4-byte
// little-endian length then the bytes; BOOL: one byte 0 or 1). InvalidArgument when the size or the
// content does not fit. `size_name` names the size in errors.
// Zero-copy: when `bytes_owner` is given (it keeps `bytes` alive and unmodified: the request body) and the
// numeric bytes are aligned to the element size, the tensor points into `bytes` and shares ownership of
// `bytes_owner`, so the bytes live as long as any copy of the tensor. Otherwise they are copied once.
Result<Tensor> tensor_from_bytes(DType dtype, const Shape& shape, std::string_view bytes,
                                 std::string_view size_name = "binary_data_size",
                                 std::shared_ptr<const void> bytes_owner = nullptr);
// Appends the host tensor `t` to `out` in that byte layout.
void append_tensor_bytes(std::string& out, const ConstTensorView& t);

struct RequestedOutput {
  std::string name;
  bool binary = false;  // its "binary_data" parameter, else the request's binary_data_output
};

struct InferRequest {
  std::string id;                        // echoed in the response ("" when absent)
  nlohmann::json parameters;             // request-level "parameters" object (null when absent)
  std::vector<NamedTensor> inputs;       // in the model's metadata input order, validated
  std::vector<RequestedOutput> outputs;  // empty = all model outputs
  bool binary_outputs = false;           // request parameters.binary_data_output
};

// Parses and validates one inference request against `model`.
//
// `body` is the whole HTTP body; `json_length` the Inference-Header-Content-Length header when present
// (then the first json_length bytes are JSON and the rest is binary tensor data, which must be exactly
// the sum of the inputs' binary_data_size).
//
// Lifetime: with `body_owner` (which keeps `body` alive and unmodified), binary numeric and BOOL inputs
// whose bytes are aligned to their element size in `body` are zero-copy: the tensors point into `body`
// and share ownership of `body_owner`, so the body lives until the last of them is gone. Where the bytes
// land depends on the client's JSON length, so a misaligned tensor is copied once instead (typed reads by
// backends stay well-defined); without `body_owner` every input is copied. Every returned tensor owns (or
// co-owns) its bytes: `body` itself need not outlive them.
// Errors are InvalidArgument naming the tensor, what was expected and what was got. Never reads outside
// `body`, whatever it holds.
Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> json_length,
                                         const backend::ModelMetadata& model,
                                         std::shared_ptr<const void> body_owner = nullptr);

struct EncodedResponse {
  std::string body;
  std::optional<size_t> json_length;  // set when any output is binary: send Inference-Header-Content-Length
};

// Encodes the response to `request`: {"model_name", "model_version" (omitted when empty), "id" (when
// non-empty), "outputs": [...]}. Only the requested outputs, in the requested order; all of `outputs`,
// in their order, when none were requested. A binary output carries parameters.binary_data_size and its
// bytes are appended after the JSON, in output order. Fails with Internal when a requested output is not
// among `outputs` or lives in device memory, and InvalidArgument when a BYTES output is not UTF-8 but
// was asked for as JSON.
Result<EncodedResponse> encode_infer_response(std::string_view model_name, std::string_view model_version,
                                              const InferRequest& request,
                                              std::span<const NamedTensor> outputs);

// GET /v2/models/{name}: {"name", "versions", "platform", "inputs": [{"name", "datatype", "shape"}],
// "outputs": [...]}, dynamic dims as -1. Platform: "onnx_onnxv1" for ONNX Runtime (the protocol's name),
// "llama.cpp_gguf" for llama.cpp, else the backend's own name.
nlohmann::json model_metadata(std::string_view name, std::span<const std::string> versions,
                              const backend::ModelMetadata& md);

// {"error": message}; invalid UTF-8 in the message is replaced, never thrown on.
std::string error_body(std::string_view message);

}  // namespace gantry::protocol::kserve
