// ONNX Runtime's types that Gantry's public ONNX headers name, declared but not defined: their
// definitions (onnxruntime_c_api.h, onnxruntime_cxx_api.h) stay in src/backend/onnx, so code that uses
// the ONNX backend compiles without ONNX Runtime's headers (as the llama.cpp headers do with llama.cpp's).
// Code that calls ONNX Runtime itself (the backend, tests and benchmarks comparing with raw ORT) includes
// <onnxruntime_cxx_api.h>.
#pragma once

struct OrtAllocator;
struct OrtEpDevice;
struct OrtMemoryInfo;
struct OrtRunOptions;
struct OrtValue;

namespace Ort {
struct Env;
struct Session;
struct SessionOptions;
}  // namespace Ort
