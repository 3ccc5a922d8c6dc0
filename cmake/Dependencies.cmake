# Every dependency comes from Debian's packages (scripts/install-deps.sh).
# A missing one stops the configure step with the package to install.

macro(mplan_require found package)
  if(NOT ${found})
    message(FATAL_ERROR "mplan needs ${package}: run scripts/install-deps.sh (as root)")
  endif()
endmacro()

find_package(yaml-cpp QUIET)
mplan_require(yaml-cpp_FOUND libyaml-cpp-dev)
find_package(Boost 1.74 QUIET)
mplan_require(Boost_FOUND libboost-graph-dev)
find_package(fmt QUIET)
mplan_require(fmt_FOUND libfmt-dev)
find_package(nlohmann_json 3 QUIET)
mplan_require(nlohmann_json_FOUND nlohmann-json3-dev)
find_package(CLI11 QUIET)
mplan_require(CLI11_FOUND libcli11-dev)
find_package(Threads REQUIRED)

find_path(GLPK_INCLUDE_DIR glpk.h)
find_library(GLPK_LIBRARY glpk)
if(GLPK_INCLUDE_DIR AND GLPK_LIBRARY)
  add_library(mplan_glpk INTERFACE)
  target_include_directories(mplan_glpk INTERFACE ${GLPK_INCLUDE_DIR})
  target_link_libraries(mplan_glpk INTERFACE ${GLPK_LIBRARY})
  set(GLPK_FOUND TRUE)
endif()
mplan_require(GLPK_FOUND libglpk-dev)

# OpenBLAS's cblas for the CPU backend's GEMMs.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
find_library(OPENBLAS_LIBRARY NAMES openblas)
if(OPENBLAS_INCLUDE_DIR AND OPENBLAS_LIBRARY)
  add_library(mplan_openblas INTERFACE)
  target_include_directories(mplan_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
  target_link_libraries(mplan_openblas INTERFACE ${OPENBLAS_LIBRARY})
  set(OPENBLAS_FOUND TRUE)
endif()
mplan_require(OPENBLAS_FOUND libopenblas-dev)

# ONNX's protobuf schema for `mplan import` (frontend/onnx): Debian's
# libonnx-dev (its CMake package exports onnx_proto) and libprotobuf-dev.
find_package(ONNX QUIET)
find_package(Protobuf QUIET)
if(TARGET onnx_proto AND Protobuf_FOUND)
  add_library(mplan_onnx INTERFACE)
  target_link_libraries(mplan_onnx INTERFACE onnx_proto protobuf::libprotobuf)
  set(MPLAN_ONNX_FOUND TRUE)
endif()
mplan_require(MPLAN_ONNX_FOUND "libonnx-dev and libprotobuf-dev")

if(MPLAN_BUILD_TESTS)
  find_package(GTest QUIET)
  mplan_require(GTest_FOUND libgtest-dev)
  include(GoogleTest)
endif()

# mplan_add_test(NAME name SOURCES a.cpp b.cpp LIBS lib... [LABELS l...])
# One GoogleTest executable, its tests registered with ctest one by one.
function(mplan_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${T_NAME} PRIVATE
    MPLAN_SOURCE_DIR="${MPLAN_ROOT}" MPLAN_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}" ENVIRONMENT "MPLAN_SOURCE_DIR=${MPLAN_ROOT}")
endfunction()
