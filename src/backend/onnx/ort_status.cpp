#include "backend/onnx/ort_status.h"

#include <cstring>

namespace gantry::onnx {

Status status_from_ort(const Ort::Exception& e, std::string_view context) {
  const std::string msg = std::string(context) + ": " + e.what();
  switch (e.GetOrtErrorCode()) {
    case ORT_NO_SUCHFILE:
      return NotFound(msg);
    case ORT_INVALID_PROTOBUF:
    case ORT_INVALID_GRAPH:
      return Corrupt(msg);
    case ORT_NOT_IMPLEMENTED:
      return Unsupported(msg);
    case ORT_INVALID_ARGUMENT:
      return InvalidArgument(msg);
    case ORT_FAIL:
      if (std::strstr(e.what(), "Protobuf parsing failed") || std::strstr(e.what(), "Load model"))
        return Corrupt(msg);
      return Internal(msg);
    default:
      return Internal(msg);
  }
}

std::string take_message(OrtStatus* status) {
  const OrtApi& api = Ort::GetApi();
  std::string m = api.GetErrorMessage(status);
  api.ReleaseStatus(status);
  return m;
}

}  // namespace gantry::onnx
