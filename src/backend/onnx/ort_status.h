// ONNX Runtime errors as Gantry Statuses (private to the backend).
#pragma once

#include <onnxruntime_cxx_api.h>

#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::onnx {

// Maps an Ort::Exception to a Status with `context` prefixed: NotFound (no file), Corrupt (not a valid
// model), Unsupported (not implemented), InvalidArgument, else Internal.
Status status_from_ort(const Ort::Exception& e, std::string_view context);

// The message of `status`, which it releases (a non-null OrtStatus from the C API).
std::string take_message(OrtStatus* status);

}  // namespace gantry::onnx
