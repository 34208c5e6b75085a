// Test helper: runs a model with plain ONNX Runtime calls (no Gantry code in the path), for comparing.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <string>
#include <vector>

#include "gantry/backend/onnx/ort_env.h"
#include "gantry/core/tensor.h"

namespace gantry::testing {

inline Ort::SessionOptions raw_options(int threads) {
  Ort::SessionOptions so;
  so.SetGraphOptimizationLevel(ORT_ENABLE_ALL);
  so.SetIntraOpNumThreads(threads);
  so.SetInterOpNumThreads(1);
  return so;
}

// Runs `session` on host tensors given in input order; returns the outputs' raw bytes.
inline std::vector<std::vector<char>> raw_run(Ort::Session& session, const std::vector<Tensor>& inputs) {
  Ort::AllocatorWithDefaultOptions alloc;
  std::vector<std::string> in_names, out_names;
  for (size_t i = 0; i < session.GetInputCount(); ++i)
    in_names.push_back(session.GetInputNameAllocated(i, alloc).get());
  for (size_t i = 0; i < session.GetOutputCount(); ++i)
    out_names.push_back(session.GetOutputNameAllocated(i, alloc).get());
  std::vector<const char*> in_c, out_c;
  for (auto& n : in_names) in_c.push_back(n.c_str());
  for (auto& n : out_names) out_c.push_back(n.c_str());
  auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  std::vector<Ort::Value> values;
  for (const auto& t : inputs) {
    const auto& d = t.shape().dims();
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    if (t.dtype() == DType::kInt64) type = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    values.push_back(
        Ort::Value::CreateTensor(mem, const_cast<void*>(t.data()), t.byte_size(), d.data(), d.size(), type));
  }
  auto outs = session.Run(Ort::RunOptions{nullptr}, in_c.data(), values.data(), values.size(), out_c.data(),
                          out_c.size());
  std::vector<std::vector<char>> bytes;
  for (auto& o : outs) {
    auto info = o.GetTensorTypeAndShapeInfo();
    size_t n = info.GetElementCount();
    size_t elem = info.GetElementType() == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 ? 8 : 4;
    const char* p = static_cast<const char*>(o.GetTensorRawData());
    bytes.emplace_back(p, p + n * elem);
  }
  return bytes;
}

inline Ort::Env& raw_env() { return (*gantry::onnx::OrtRuntime::get())->env(); }

}  // namespace gantry::testing
