# Helpers that give every Gantry target the same warnings and layout.

# Strict warnings on our own code only (third-party headers come in as SYSTEM).
function(gantry_strict target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
endfunction()

# gantry_public_headers(NAME DIR): the include root of library NAME, ${CMAKE_BINARY_DIR}/inc/NAME, holding
# gantry/DIR/<header> as links to the headers directly in include/gantry/DIR (not its subfolders:
# backend/onnx and backend/llama are libraries of their own). A library sees this root and, through
# PUBLIC propagation, the roots of what it links, never a subsystem above it: an upward include
# (hw including a backend header) does not compile. Generated headers (gantry/build_info.h) stay
# visible to all. Headers added later appear at the next configure (the glob re-runs at build time).
function(gantry_public_headers name dir)
  set(root ${CMAKE_BINARY_DIR}/inc/${name})
  file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/gantry/${dir}/*.h)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/gantry/${dir})
  foreach(header ${headers})
    get_filename_component(file ${header} NAME)
    file(CREATE_LINK ${header} ${root}/gantry/${dir}/${file} SYMBOLIC)
  endforeach()
  set(gantry_include_root ${root} PARENT_SCOPE)
endfunction()

# gantry_library(NAME DIR DEPS...): a static library from every .cpp under src/DIR. DEPS are exactly the
# libraries whose headers it includes (plus third-party ones); they propagate to dependents.
function(gantry_library name dir)
  gantry_public_headers(${name} ${dir})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${dir}/*.cpp)
  if(NOT srcs)  # a subsystem with headers only (so far)
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${gantry_include_root} ${CMAKE_BINARY_DIR}/include)
    target_link_libraries(${name} INTERFACE ${ARGN})
    return()
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${gantry_include_root} ${CMAKE_BINARY_DIR}/include
                                     PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARGN})
  gantry_strict(${name})
endfunction()

# gantry_test(NAME DIR DEPS...): one GoogleTest binary from every .cpp under tests/DIR.
function(gantry_test name dir)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${dir}/*.cpp)
  if(NOT srcs)
    return()
  endif()
  add_executable(${name} ${srcs})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARGN} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    GANTRY_SOURCE_DIR="${CMAKE_SOURCE_DIR}" GANTRY_DEPS_DIR="${GANTRY_DEPS_DIR}"
    GANTRY_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gantry_strict(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ENVIRONMENT "GANTRY_LOG_LEVEL=warn")
endfunction()
