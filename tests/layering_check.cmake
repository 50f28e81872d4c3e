# keel_check_layering: which folder of a source tree may include which, for the layering tests
# (tests/app/layering_test.cmake, tests/probe/layering_test.cmake; cmake -P scripts).
#
# For each folder F in `folders` under `root`, every .hpp/.cpp/.cuh/.cu below it may include
# `"G/..."` only for G in allowed_F, and no line may contain any text in forbidden_F (set them
# in the calling scope). Appends one line per violation to the variable named by `out_violations`
# and sets `out_files` to the number of files checked. Fails when a folder has no sources.
function(keel_check_layering root folders out_violations out_files)
  set(violations "${${out_violations}}")
  set(files_checked 0)
  foreach(folder IN LISTS folders)
    file(GLOB_RECURSE sources "${root}/${folder}/*.hpp" "${root}/${folder}/*.cpp" "${root}/${folder}/*.cuh"
         "${root}/${folder}/*.cu")
    if(NOT sources)
      message(FATAL_ERROR "no sources under ${root}/${folder}")
    endif()
    foreach(source IN LISTS sources)
      math(EXPR files_checked "${files_checked} + 1")
      file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include")
      foreach(line IN LISTS includes)
        if(line MATCHES "#[ \t]*include[ \t]*\"([a-z_]+)/")
          set(target "${CMAKE_MATCH_1}")
          if(target IN_LIST folders AND NOT target IN_LIST allowed_${folder})
            string(APPEND violations "\n  ${source}: ${folder}/ may not include ${target}/: ${line}")
          endif()
        endif()
        foreach(text IN LISTS forbidden_${folder})
          string(FIND "${line}" "${text}" at)
          if(NOT at EQUAL -1)
            string(APPEND violations "\n  ${source}: ${folder}/ may not include ${text}: ${line}")
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
  set(${out_violations} "${violations}" PARENT_SCOPE)
  set(${out_files} ${files_checked} PARENT_SCOPE)
endfunction()
