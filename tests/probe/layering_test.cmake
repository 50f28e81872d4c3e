# The probe's layering, checked on its sources (cmake -P, with -DPROBE_SRC=<repo>/probe/src):
#   transport <- dump,   transport <- layout,   cuda <- reduce,   everything <- step
# The transport (publisher, command server, their CURVE guard) includes no torch, so it builds
# and is fuzzed with only keel_wire and libzmq; the reductions never reach the transport, the
# dumps or the step; only step/ (the Probe itself) sees every stage. A file that reaches
# across fails the test with its line.
cmake_minimum_required(VERSION 3.16)
if(NOT PROBE_SRC)
  message(FATAL_ERROR "pass -DPROBE_SRC=<repository>/probe/src")
endif()

set(probe_folders transport dump reduce layout step cuda)
set(allowed_transport transport)
set(allowed_dump dump transport)
set(allowed_reduce reduce cuda)
set(allowed_layout layout transport)
set(allowed_step step transport dump reduce layout cuda)
set(allowed_cuda cuda)
# Headers a folder must not include. keel/probe/probe.hpp includes torch; the transport takes
# AttachError from keel/probe/attach_error.hpp.
set(forbidden_transport "torch/" "ATen/" "c10/" "keel/probe/probe.hpp")
set(forbidden_cuda "torch/" "ATen/" "c10/")

set(violations "")
set(files_checked 0)
foreach(folder IN LISTS probe_folders)
  file(GLOB_RECURSE sources "${PROBE_SRC}/${folder}/*.hpp" "${PROBE_SRC}/${folder}/*.cpp"
       "${PROBE_SRC}/${folder}/*.cuh" "${PROBE_SRC}/${folder}/*.cu")
  if(NOT sources)
    message(FATAL_ERROR "no sources under ${PROBE_SRC}/${folder}: is PROBE_SRC the probe's src folder?")
  endif()
  foreach(source IN LISTS sources)
    math(EXPR files_checked "${files_checked} + 1")
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include")
    foreach(line IN LISTS includes)
      if(line MATCHES "#[ \t]*include[ \t]*\"([a-z_]+)/")
        set(target "${CMAKE_MATCH_1}")
        if(target IN_LIST probe_folders AND NOT target IN_LIST allowed_${folder})
          string(APPEND violations "\n  ${source}: ${folder}/ may not include ${target}/: ${line}")
        endif()
      endif()
      foreach(header IN LISTS forbidden_${folder})
        string(FIND "${line}" "${header}" at)
        if(NOT at EQUAL -1)
          string(APPEND violations "\n  ${source}: ${folder}/ may not include ${header}: ${line}")
        endif()
      endforeach()
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
