# CUDA Toolkit for the worker: the runtime (static, so the worker starts
# without a driver and loads it through dlopen), NVRTC, and our own targets
# for CUPTI and nvperf. CMake's CUDA::cupti target is not reliable across
# toolkit layouts (nvbench makes the same observation), so we locate the
# headers and libraries ourselves and fail with a clear message.
find_package(CUDAToolkit 12.8 REQUIRED)
# FindCUDAToolkit makes CUDA::nvrtc depend on CUDA::cuda_driver (the stub
# libcuda.so), which would put libcuda.so.1 in kopt-worker's NEEDED list;
# NVRTC itself does not use the driver, so drop that dependency.
set_property(TARGET CUDA::nvrtc PROPERTY INTERFACE_LINK_LIBRARIES "")

set(_kopt_cupti_roots
  "${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI"
  "${CUDAToolkit_TARGET_DIR}/extras/CUPTI"
  "${CUDAToolkit_TARGET_DIR}")

find_path(KOPT_CUPTI_INCLUDE_DIR cupti.h
  HINTS ${_kopt_cupti_roots} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(KOPT_CUPTI_LIBRARY cupti
  HINTS ${_kopt_cupti_roots} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib64 lib NO_DEFAULT_PATH)
find_library(KOPT_NVPERF_HOST_LIBRARY nvperf_host
  HINTS ${_kopt_cupti_roots} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib64 lib NO_DEFAULT_PATH)
find_library(KOPT_NVPERF_TARGET_LIBRARY nvperf_target
  HINTS ${_kopt_cupti_roots} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib64 lib NO_DEFAULT_PATH)

foreach(_v KOPT_CUPTI_INCLUDE_DIR KOPT_CUPTI_LIBRARY KOPT_NVPERF_HOST_LIBRARY KOPT_NVPERF_TARGET_LIBRARY)
  if(NOT ${_v})
    message(FATAL_ERROR "kopt-worker needs CUPTI and nvperf from the CUDA Toolkit; ${_v} not found "
                        "under ${CUDAToolkit_LIBRARY_ROOT}. Set -DKOPT_ENABLE_WORKER=OFF to build "
                        "only the control plane.")
  endif()
endforeach()

add_library(kopt_cupti INTERFACE)
add_library(kopt::cupti ALIAS kopt_cupti)
target_include_directories(kopt_cupti SYSTEM INTERFACE "${KOPT_CUPTI_INCLUDE_DIR}")
target_link_libraries(kopt_cupti INTERFACE "${KOPT_CUPTI_LIBRARY}" CUDA::cudart_static)

add_library(kopt_nvperf INTERFACE)
add_library(kopt::nvperf ALIAS kopt_nvperf)
target_include_directories(kopt_nvperf SYSTEM INTERFACE "${KOPT_CUPTI_INCLUDE_DIR}")
target_link_libraries(kopt_nvperf INTERFACE "${KOPT_NVPERF_HOST_LIBRARY}" "${KOPT_NVPERF_TARGET_LIBRARY}")

# Guard: a target that links libcuda directly would not start on a machine
# without a driver. CI checks the built binaries with scripts/check-no-libcuda.
