# Third-party dependencies: Debian packages through find_package/pkg-config, and the two native
# runtimes that scripts/setup.sh lays out under GANTRY_DEPS_DIR (never downloaded by CMake).

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED)
# gantry serve: Boost.Beast/Asio (header-only) for HTTP, prometheus-cpp for the metrics registry.
find_package(Boost 1.74 REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
# gantry serve --grpc-port: gRPC C++ (Debian's libgrpc++-dev) and its protoc plugin.
find_package(gRPC CONFIG REQUIRED)
if(GANTRY_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(GANTRY_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# ONNX Runtime 1.29 (CPU library + headers from npm com.github.asus4.onnxruntime).
set(GANTRY_ORT_DIR "${GANTRY_DEPS_DIR}/onnxruntime")
if(NOT EXISTS "${GANTRY_ORT_DIR}/lib/libonnxruntime.so.1")
  message(FATAL_ERROR "ONNX Runtime not found in ${GANTRY_ORT_DIR}: run 'make setup' first")
endif()
add_library(onnxruntime::onnxruntime SHARED IMPORTED GLOBAL)
set_target_properties(onnxruntime::onnxruntime PROPERTIES
  IMPORTED_LOCATION "${GANTRY_ORT_DIR}/lib/libonnxruntime.so.1"
  IMPORTED_SONAME "libonnxruntime.so.1"
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${GANTRY_ORT_DIR}/include"
  INTERFACE_INCLUDE_DIRECTORIES "${GANTRY_ORT_DIR}/include")

# llama.cpp (built by setup.sh from node-llama-cpp's bundled source).
find_package(llama CONFIG REQUIRED PATHS "${GANTRY_DEPS_DIR}/llama/install" NO_DEFAULT_PATH)
# llama.cpp's `common` library from the same build (its chat layer: Jinja templates, tool-call formats and
# parsers). Its headers are not installed, so they come from the pinned source tree; they hide the vendored
# JSON library behind a pimpl (common/json.h), so nothing of it meets Debian's nlohmann_json here.
set(GANTRY_LLAMA_COMMON_LIB "${GANTRY_DEPS_DIR}/llama/install/lib/libllama-common.so")
if(NOT EXISTS "${GANTRY_LLAMA_COMMON_LIB}")
  message(FATAL_ERROR "llama.cpp's common library is missing (${GANTRY_LLAMA_COMMON_LIB}): run `make setup`")
endif()
add_library(llama::common SHARED IMPORTED GLOBAL)
set_target_properties(llama::common PROPERTIES
  IMPORTED_LOCATION "${GANTRY_LLAMA_COMMON_LIB}"
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${GANTRY_DEPS_DIR}/llama/src/common"
  INTERFACE_INCLUDE_DIRECTORIES "${GANTRY_DEPS_DIR}/llama/src/common"
  INTERFACE_LINK_LIBRARIES llama)

# Binaries find the shared libraries we ship next to the cache without LD_LIBRARY_PATH.
set(CMAKE_BUILD_RPATH "${GANTRY_ORT_DIR}/lib;${GANTRY_DEPS_DIR}/llama/install/lib")
