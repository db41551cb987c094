# The C/C++ libraries nanovllm links, found with find_path / find_library (no pkg-config, which
# a bare GPU machine lacks). On Debian these resolve to the -dev packages under /usr (shared
# libraries); on a GPU machine scripts/gpu-build.sh points CMAKE_INCLUDE_PATH / CMAKE_LIBRARY_PATH
# at the unpacked bundle of scripts/gpu-bundle.sh, which holds only headers and static .a files.
# Any of them can be overridden with -D<NAME>_INC=... -D<NAME>_LIB=... .
#
# nv_find_c_lib(<name> HEADER <file> [NAMES <lib>...] [SUFFIXES <dir>...]) defines the
# INTERFACE target nv_dep_<name>; with no NAMES it is header-only.
function(nv_find_c_lib name)
  cmake_parse_arguments(A "" "HEADER" "NAMES;SUFFIXES;PATHS" ${ARGN})
  string(TOUPPER ${name} V)
  # The plain names first (Debian's update-alternatives links), then the SUFFIXES subfolders.
  find_path(${V}_INC ${A_HEADER} PATHS ${A_PATHS})
  if(NOT ${V}_INC AND A_SUFFIXES)
    find_path(${V}_INC ${A_HEADER} PATH_SUFFIXES ${A_SUFFIXES})
  endif()
  set(_lib "")
  if(A_NAMES)
    find_library(${V}_LIB NAMES ${A_NAMES})
    if(NOT ${V}_LIB AND A_SUFFIXES)
      find_library(${V}_LIB NAMES ${A_NAMES} PATH_SUFFIXES ${A_SUFFIXES})
    endif()
    set(_lib ${${V}_LIB})
  endif()
  if(NOT ${V}_INC OR (A_NAMES AND NOT _lib))
    message(FATAL_ERROR "${name}: ${A_HEADER} (header) or lib '${A_NAMES}' not found "
            "(${V}_INC='${${V}_INC}', ${V}_LIB='${_lib}'). Install the Debian -dev packages "
            "(scripts/deps.sh), or on a GPU machine use scripts/gpu-build.sh with the bundle of "
            "scripts/gpu-bundle.sh, or pass -D${V}_INC=<dir> -D${V}_LIB=<file>.")
  endif()
  add_library(nv_dep_${name} INTERFACE)
  target_include_directories(nv_dep_${name} SYSTEM INTERFACE ${${V}_INC})
  if(_lib)
    target_link_libraries(nv_dep_${name} INTERFACE ${_lib})
  endif()
  message(STATUS "${name}: ${${V}_INC} ${_lib}")
endfunction()

nv_find_c_lib(pcre2 HEADER pcre2.h NAMES pcre2-8)
nv_find_c_lib(utf8proc HEADER utf8proc.h NAMES utf8proc)
nv_find_c_lib(xxhash HEADER xxhash.h NAMES xxhash)
nv_find_c_lib(cli11 HEADER CLI/CLI.hpp)
# Debian's OpenBLAS lives in openblas-pthread/ below the multiarch dirs (the plain names are
# update-alternatives links, which an unpacked bundle does not have).
nv_find_c_lib(openblas HEADER cblas.h NAMES openblas
              SUFFIXES openblas-pthread x86_64-linux-gnu/openblas-pthread openblas)
if(OPENBLAS_LIB MATCHES "\\.a$")  # static OpenBLAS (the GPU bundle) needs libm and pthreads
  target_link_libraries(nv_dep_openblas INTERFACE m Threads::Threads)
endif()

# oneDNN is optional: without it BF16 prefill GEMMs on the CPU use the streaming kernel
# (slower, same results within rounding). The GPU bundle leaves it out (shared library only).
find_library(DNNL_LIB dnnl)
