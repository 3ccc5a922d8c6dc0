# mplan_find_nccl(): NCCL for CUDA programs of several ranks (runtime/cuda/nccl).
# Looks in NCCL_ROOT (a CMake or environment variable), the CUDA toolkit
# (/usr/local/cuda/include/nccl.h with libnccl beside the toolkit's
# libraries), the system's folders, and the nvidia-nccl pip wheel's layout
# (site-packages/nvidia/nccl/{include,lib}, whose library is libnccl.so.2
# only). Sets NCCL_FOUND, NCCL_INCLUDE_DIR and NCCL_LIBRARY in the caller's scope.
function(mplan_find_nccl)
  set(hints)
  if(NCCL_ROOT)
    list(APPEND hints "${NCCL_ROOT}")
  endif()
  if(DEFINED ENV{NCCL_ROOT})
    list(APPEND hints "$ENV{NCCL_ROOT}")
  endif()
  if(NOT TARGET CUDA::cudart)
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    list(APPEND hints "${CUDAToolkit_LIBRARY_ROOT}")
    foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
      get_filename_component(parent "${dir}" DIRECTORY)
      list(APPEND hints "${parent}")
    endforeach()
  endif()
  find_program(MPLAN_PYTHON3 python3)
  if(MPLAN_PYTHON3)
    execute_process(COMMAND "${MPLAN_PYTHON3}" -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])"
                    OUTPUT_VARIABLE wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
    if(status EQUAL 0 AND wheel)
      list(APPEND hints "${wheel}")
    endif()
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${hints} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${hints} PATH_SUFFIXES lib64 lib
               lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(NCCL_FOUND TRUE PARENT_SCOPE)
  else()
    set(NCCL_FOUND FALSE PARENT_SCOPE)
  endif()
  set(NCCL_INCLUDE_DIR "${NCCL_INCLUDE_DIR}" PARENT_SCOPE)
  set(NCCL_LIBRARY "${NCCL_LIBRARY}" PARENT_SCOPE)
endfunction()
