# Included right after find_package(Torch), here and in keelConfig.cmake (for projects that
# link keel::probe): makes sure that the libtorch found is one keel builds with, and that all
# of libtorch, and the libraries it was built with, come from the one that was found.
#
# 0. A libtorch keel cannot build with stops here with what to do, not at the link or at run
#    time. keel is tested against Debian's 1.13, the pinned official 2.x and the newest torch
#    on the package index (README, "With the official libtorch 2.x").
if(DEFINED Torch_VERSION AND NOT Torch_VERSION STREQUAL "" AND Torch_VERSION VERSION_LESS 1.13)
  message(FATAL_ERROR "keel: the libtorch in ${TORCH_INSTALL_PREFIX} is ${Torch_VERSION}; keel "
    "needs libtorch 1.13 or newer (tested: Debian's 1.13, pip's torch 2.11 and the newest).")
endif()
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR "keel: the libtorch in ${TORCH_INSTALL_PREFIX} (${Torch_VERSION}) is built "
    "with the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0), as pip's torch was before 2.7 and the "
    "libtorch zips named 'pre-cxx11' are. keel's code that does not include torch (keel_wire) "
    "and the C++ libraries it links from Debian (GoogleTest) use the C++11 ABI, and the two do "
    "not link together. Use pip's torch 2.7 or newer, or the 'cxx11 ABI' libtorch zip.")
endif()

# Two traps of the official libtorch 2.x's CMake files on a machine that also has Debian's
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

# 3. The libraries libtorch was built with come first, at link time and at run time.
#    libtorch_cuda.so finds its CUDA libraries (NCCL, cuDNN, cuBLAS, the CUDA runtime) through
#    its own RPATH: the wheel's nvidia/*/lib folders, or $ORIGIN in the libtorch zip. But
#    TorchConfig.cmake links the CUDA toolkit's libcudart and libnvrtc by full path, so CMake
#    puts the toolkit's folder (/usr/local/cuda/lib) on the program's -rpath, and ld searches
#    -rpath before a library's own RPATH. torch 2.15's libtorch_cuda.so was then linked against
#    the toolkit's older libnccl.so.2 (undefined ncclCommGrow, ...), and the loader gave the
#    program the toolkit's libcudart.so.13 instead of the one torch was built with.
#    Every target that links torch gets libtorch_cuda.so's own folders on its -rpath ahead of
#    CMake's, which decide both ld's search and the program's RUNPATH.
set(_keel_torch_lib_dir "${TORCH_INSTALL_PREFIX}/lib")
if(TARGET torch AND EXISTS "${_keel_torch_lib_dir}/libtorch_cuda.so")
  file(READ_ELF "${_keel_torch_lib_dir}/libtorch_cuda.so" RPATH _keel_rpath RUNPATH _keel_runpath
       CAPTURE_ERROR _keel_elf_error)
  if(_keel_elf_error)
    message(WARNING "keel: could not read libtorch_cuda.so's RPATH (${_keel_elf_error}): only "
      "${_keel_torch_lib_dir} goes ahead of the CUDA toolkit's folders.")
  endif()
  # KEEL_TORCH_LIBRARY_DIRS (a list) and KEEL_TORCH_LIBRARY_PATH (':'-joined): those folders.
  set(KEEL_TORCH_LIBRARY_DIRS "")
  foreach(_keel_dir IN LISTS _keel_runpath _keel_rpath)
    string(REPLACE "$ORIGIN" "${_keel_torch_lib_dir}" _keel_dir "${_keel_dir}")
    get_filename_component(_keel_dir "${_keel_dir}" ABSOLUTE)
    if(NOT IS_DIRECTORY "${_keel_dir}")
      message(WARNING "keel: libtorch_cuda.so looks for its CUDA libraries in ${_keel_dir}, "
        "which does not exist: the torch in ${TORCH_INSTALL_PREFIX} was installed without one of "
        "its nvidia-* packages (pip install --no-deps?). The link may fail or take the CUDA "
        "toolkit's copies; reinstall torch with its dependencies (pip install torch==${Torch_VERSION}).")
      continue()
    endif()
    list(APPEND KEEL_TORCH_LIBRARY_DIRS "${_keel_dir}")
  endforeach()
  list(APPEND KEEL_TORCH_LIBRARY_DIRS "${_keel_torch_lib_dir}")
  list(REMOVE_DUPLICATES KEEL_TORCH_LIBRARY_DIRS)
  list(JOIN KEEL_TORCH_LIBRARY_DIRS ":" KEEL_TORCH_LIBRARY_PATH)
  set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath,${KEEL_TORCH_LIBRARY_PATH}")
  message(STATUS "keel: libtorch's own libraries first on the -rpath: ${KEEL_TORCH_LIBRARY_PATH}")
  unset(_keel_rpath)
  unset(_keel_runpath)
  unset(_keel_elf_error)
  unset(_keel_dir)
endif()
unset(_keel_torch_lib_dir)
