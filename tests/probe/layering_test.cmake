# The probe's layering, checked on its sources (cmake -P, with -DPROBE_SRC=<repo>/probe/src):
#   transport <- dump,   cuda <- reduce,   everything <- step
# snapshot/ (the state kept in memory to rewind to) stands alone on the public headers.
# forecast/ (the early warning) reads step records: keel/wire and origin/'s one spelling of a
# number, and no torch.
# layout/ stands on keel/wire alone (the policies it describes are keel/wire/vocabulary.hpp's).
# origin/ (the tracer of where a NaN was born, and the state a re-run starts from) stands alone,
# and so does record/ (the flight recorder: keel_wire only, fed by the publisher through a tap).
# The transport (publisher, command server, their CURVE guard) includes no torch, so it builds
# and is fuzzed with only keel_wire and libzmq; the reductions never reach the transport, the
# dumps or the step; only step/ (the Probe itself) sees every stage. front/ (the C++ front:
# libtorch's module and optimizer adapted for the core) may include every stage, and none
# includes it: the core names no torch::optim or torch::nn::Module type, only the adapters
# (keel/probe/trained_model.hpp, optimizer_adapter.hpp) that a Python front implements too.
# The public headers (-DPROBE_INCLUDE=<repo>/probe/include) are the layer every stage and every
# user stands on: they include only each other and keel/wire (a stage's header is not installed),
# none of them includes the whole Probe (probe.hpp is the top), and what a folder may not include
# it may not reach through them either: the transport and the recorder stay torch-free through
# keel/probe/attach_error.hpp as much as through their own lines.
# A file that reaches across fails the test with its line.
cmake_minimum_required(VERSION 3.16)
if(NOT PROBE_SRC OR NOT PROBE_INCLUDE)
  message(FATAL_ERROR "pass -DPROBE_SRC=<repository>/probe/src -DPROBE_INCLUDE=<repository>/probe/include")
endif()

set(probe_folders transport dump reduce layout step cuda origin record snapshot forecast front)
set(allowed_transport transport)
set(allowed_dump dump transport)
set(allowed_reduce reduce cuda)
set(allowed_layout layout)
set(allowed_step step transport dump reduce layout cuda origin record snapshot forecast)
set(allowed_snapshot snapshot)
set(allowed_forecast forecast origin)
set(allowed_origin origin)
set(allowed_record record)
set(allowed_cuda cuda)
set(allowed_front front step transport dump reduce layout cuda origin record snapshot forecast)
# Headers a folder must not include. keel/probe/probe.hpp includes torch; the transport takes
# AttachError from keel/probe/attach_error.hpp. Only step/ and front/ see the whole Probe: the
# stages that read the settings take them from keel/probe/probe_options.hpp.
set(forbidden_transport "torch/" "ATen/" "c10/" "keel/probe/probe.hpp")
set(forbidden_layout "keel/probe/probe.hpp")
set(forbidden_dump "keel/probe/probe.hpp")
set(forbidden_reduce "keel/probe/probe.hpp")
set(forbidden_origin "keel/probe/probe.hpp")
set(forbidden_snapshot "keel/probe/probe.hpp")
set(forbidden_cuda "torch/" "ATen/" "c10/")
set(forbidden_record "torch/" "ATen/" "c10/" "keel/probe/probe.hpp")
set(forbidden_forecast "torch/" "ATen/" "c10/" "keel/probe/probe.hpp")

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
# The public headers: what each includes, and all it reaches through the others (a fixpoint).
file(GLOB public_headers "${PROBE_INCLUDE}/keel/probe/*.hpp")
if(NOT public_headers)
  message(FATAL_ERROR "no public headers under ${PROBE_INCLUDE}/keel/probe")
endif()
set(public_names "")
foreach(header IN LISTS public_headers)
  math(EXPR files_checked "${files_checked} + 1")
  get_filename_component(name "${header}" NAME)
  list(APPEND public_names "${name}")
  file(STRINGS "${header}" public_lines_${name} REGEX "^[ \t]*#[ \t]*include")
  set(public_reach_${name} "${name}")
  foreach(line IN LISTS public_lines_${name})
    if(line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(target "${CMAKE_MATCH_1}")
      if(NOT target MATCHES "^keel/(probe|wire)/")
        string(APPEND violations "\n  ${header}: a public header includes only keel/probe/ and keel/wire/: ${line}")
      elseif(target STREQUAL "keel/probe/probe.hpp")
        string(APPEND violations "\n  ${header}: a public header below the Probe includes the whole Probe: ${line}")
      endif()
    endif()
  endforeach()
endforeach()
set(grown TRUE)
while(grown)
  set(grown FALSE)
  foreach(name IN LISTS public_names)
    foreach(line IN LISTS public_lines_${name})
      if(line MATCHES "#[ \t]*include[ \t]*\"keel/probe/([a-z_]+\\.hpp)\"")
        foreach(reached IN LISTS public_reach_${CMAKE_MATCH_1})
          if(NOT reached IN_LIST public_reach_${name})
            list(APPEND public_reach_${name} "${reached}")
            set(grown TRUE)
          endif()
        endforeach()
      endif()
    endforeach()
  endforeach()
endwhile()
# A folder's forbidden texts, in the public headers it reaches.
foreach(folder IN LISTS probe_folders)
  if(NOT forbidden_${folder})
    continue()
  endif()
  file(GLOB_RECURSE sources "${PROBE_SRC}/${folder}/*.hpp" "${PROBE_SRC}/${folder}/*.cpp" "${PROBE_SRC}/${folder}/*.cuh"
       "${PROBE_SRC}/${folder}/*.cu")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"keel/probe/")
    foreach(include IN LISTS includes)
      if(NOT include MATCHES "\"keel/probe/([a-z_]+\\.hpp)\"" OR NOT CMAKE_MATCH_1 IN_LIST public_names)
        continue()
      endif()
      set(included "${CMAKE_MATCH_1}")
      foreach(reached IN LISTS public_reach_${included})
        if(reached STREQUAL included)
          continue()   # its own line was checked with the folder's
        endif()
        foreach(line IN LISTS public_lines_${reached})
          foreach(text IN LISTS forbidden_${folder})
            string(FIND "${line}" "${text}" at)
            if(NOT at EQUAL -1)
              string(APPEND violations "\n  ${source}: ${folder}/ may not include ${text}, which keel/probe/${reached} "
                                       "includes (${include}): ${line}")
            endif()
          endforeach()
        endforeach()
      endforeach()
      # The header's own lines, which the folder's check did not read.
      foreach(line IN LISTS public_lines_${included})
        foreach(text IN LISTS forbidden_${folder})
          string(FIND "${line}" "${text}" at)
          if(NOT at EQUAL -1)
            string(APPEND violations "\n  ${source}: ${folder}/ may not include ${text}, which keel/probe/${included} "
                                     "includes: ${line}")
          endif()
        endforeach()
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
message(STATUS "probe layering holds in ${files_checked} files (the public headers among them)")
