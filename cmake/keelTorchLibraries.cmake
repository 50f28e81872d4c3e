# Included right after find_package(Torch), here and in keelConfig.cmake (for projects that
# link keel::probe): makes sure that all of libtorch comes from the one that was found. Two
# traps of the official libtorch 2.x's CMake files on a machine that also has Debian's
# libtorch-dev (as keel's CI does):
#
# 1. TorchConfig.cmake finds the rest of libtorch with find_package(Caffe2 PATHS <its folder>),
#    and PATHS come after CMAKE_PREFIX_PATH and the system folders. Given only Torch_DIR, it
#    got Debian's Caffe2 (libtorch 1.13) under 2.x's headers: a link that fails with undefined
#    at::_ops symbols. Nothing can be mended after the fact: stop with what to do.
get_filename_component(_keel_torch_cmake_dir "${Torch_DIR}/.." REALPATH)
get_filename_component(_keel_caffe2_dir "${Caffe2_DIR}" REALPATH)
if(Caffe2_DIR AND NOT _keel_caffe2_dir STREQUAL "${_keel_torch_cmake_dir}/Caffe2")
  message(FATAL_ERROR "keel: Torch_DIR is ${Torch_DIR} but its Caffe2 came from ${Caffe2_DIR}, "
    "another libtorch. Put the libtorch's CMake prefix on CMAKE_PREFIX_PATH "
    "(-DCMAKE_PREFIX_PATH=${_keel_torch_cmake_dir}) instead of setting Torch_DIR alone.")
endif()
unset(_keel_torch_cmake_dir)
unset(_keel_caffe2_dir)

# 2. It then looks for libc10 with find_library(c10_LIBRARY c10 PATHS <its prefix>/lib),
#    which again searches the system folders first. This one is mended here: TORCH_LIBRARIES
#    names the libc10 of the libtorch that was found.
#
#    Without this, a 2.x build got Debian's /usr/lib/.../libc10.so (libc10.so.1.13) beside its
#    own libc10.so. Both were loaded and the program died before main: "DispatchKeySet.cpp:176
#    INTERNAL ASSERT FAILED" from libtorch_cpu.so's static initialisers.
if(TORCH_INSTALL_PREFIX AND EXISTS "${TORCH_INSTALL_PREFIX}/lib/libc10.so"
   AND NOT c10_LIBRARY STREQUAL "${TORCH_INSTALL_PREFIX}/lib/libc10.so")
  set(_keel_torch_libraries "")
  foreach(_keel_lib IN LISTS TORCH_LIBRARIES)
    if(_keel_lib STREQUAL c10_LIBRARY)
      set(_keel_lib "${TORCH_INSTALL_PREFIX}/lib/libc10.so")
    endif()
    list(APPEND _keel_torch_libraries "${_keel_lib}")
  endforeach()
  message(STATUS "keel: libc10 from ${TORCH_INSTALL_PREFIX}/lib, not ${c10_LIBRARY}")
  set(TORCH_LIBRARIES "${_keel_torch_libraries}")
  set(c10_LIBRARY "${TORCH_INSTALL_PREFIX}/lib/libc10.so" CACHE FILEPATH "libc10 of the libtorch found" FORCE)
  unset(_keel_torch_libraries)
  unset(_keel_lib)
endif()
