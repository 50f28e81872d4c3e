# The probe's layering, checked on its sources (cmake -P, with -DPROBE_SRC=<repo>/probe/src):
#   transport <- dump,   transport <- layout,   cuda <- reduce,   everything <- step
# origin/ (the tracer of where a NaN was born, and the state a re-run starts from) stands alone,
# and so does record/ (the flight recorder: keel_wire only, fed by the publisher through a tap).
# The transport (publisher, command server, their CURVE guard) includes no torch, so it builds
# and is fuzzed with only keel_wire and libzmq; the reductions never reach the transport, the
# dumps or the step; only step/ (the Probe itself) sees every stage. front/ (the C++ front:
# libtorch's module and optimizer adapted for the core) may include every stage, and none
# includes it: the core names no torch::optim or torch::nn::Module type, only the adapters
# (keel/probe/trained_model.hpp, optimizer_adapter.hpp) that a Python front implements too.
# A file that reaches across fails the test with its line.
cmake_minimum_required(VERSION 3.16)
if(NOT PROBE_SRC)
  message(FATAL_ERROR "pass -DPROBE_SRC=<repository>/probe/src")
endif()

set(probe_folders transport dump reduce layout step cuda origin record front)
set(allowed_transport transport)
set(allowed_dump dump transport)
set(allowed_reduce reduce cuda)
set(allowed_layout layout transport)
set(allowed_step step transport dump reduce layout cuda origin record)
set(allowed_origin origin)
set(allowed_record record)
set(allowed_cuda cuda)
set(allowed_front front step transport dump reduce layout cuda origin record)
# Headers a folder must not include. keel/probe/probe.hpp includes torch; the transport takes
# AttachError from keel/probe/attach_error.hpp. Only step/ and front/ see the whole Probe: the
# stages that read the settings take them from keel/probe/probe_options.hpp.
set(forbidden_transport "torch/" "ATen/" "c10/" "keel/probe/probe.hpp")
set(forbidden_layout "keel/probe/probe.hpp")
set(forbidden_dump "keel/probe/probe.hpp")
set(forbidden_reduce "keel/probe/probe.hpp")
set(forbidden_origin "keel/probe/probe.hpp")
set(forbidden_cuda "torch/" "ATen/" "c10/")
set(forbidden_record "torch/" "ATen/" "c10/" "keel/probe/probe.hpp")

include(${CMAKE_CURRENT_LIST_DIR}/../layering_check.cmake)
set(violations "")
keel_check_layering("${PROBE_SRC}" "${probe_folders}" violations files_checked)
# The core reaches the model and the optimizer through their adapters only.
foreach(folder IN LISTS probe_folders)
  if(folder STREQUAL "front")
    continue()
  endif()
  file(GLOB_RECURSE sources "${PROBE_SRC}/${folder}/*.hpp" "${PROBE_SRC}/${folder}/*.cpp" "${PROBE_SRC}/${folder}/*.cu")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" lines REGEX "torch::(optim::|nn::Module)")
    foreach(line IN LISTS lines)
      if(NOT line MATCHES "^[ \t]*//")
        string(APPEND violations "\n  ${source}: ${folder}/ names a front's type (only front/ may): ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
# Every source belongs to a stage: nothing is left loose at the top.
file(GLOB loose "${PROBE_SRC}/*.cpp" "${PROBE_SRC}/*.hpp")
foreach(source IN LISTS loose)
  string(APPEND violations "\n  ${source}: in no stage folder (${probe_folders})")
endforeach()

if(violations)
  message(FATAL_ERROR "the probe's layering is broken:${violations}")
endif()
message(STATUS "probe layering holds in ${files_checked} files")
