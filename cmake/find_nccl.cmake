# NCCL for tensor parallelism on CUDA. Sets NCCL_INC and NCCL_LIB (cache) when found.
#
# Looked for, in order: $NCCL_ROOT / $NCCL_HOME, the CUDA toolkit (Debian / NVIDIA .deb layout:
# libnccl.so beside libcudart), and the pip wheel that PyTorch images carry (nvidia-nccl-cu12 /
# -cu13: site-packages/nvidia/nccl/{include/nccl.h, lib/libnccl.so.2}). The wheel ships only the
# versioned libnccl.so.2 (no libnccl.so link), so that file name is tried as well.
set(_nccl_hints)
foreach(_v NCCL_ROOT NCCL_HOME)
  if(DEFINED ENV{${_v}})
    list(APPEND _nccl_hints "$ENV{${_v}}")
  endif()
endforeach()
list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
foreach(_inc ${CUDAToolkit_INCLUDE_DIRS})
  get_filename_component(_parent "${_inc}" DIRECTORY)
  list(APPEND _nccl_hints "${_parent}")
endforeach()
# Each python3 on PATH may own a wheel (the image's python may not be the first one).
find_program(_nccl_python NAMES python3 python)
if(_nccl_python)
  execute_process(
    COMMAND "${_nccl_python}" -c "import nvidia.nccl as m; print(';'.join(m.__path__))"
    OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _nccl_wheel)
    list(APPEND _nccl_hints ${_nccl_wheel})
  endif()
endif()
find_path(NCCL_INC nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NCCL_LIB NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
unset(_nccl_hints)
unset(_nccl_wheel)
