# GUI tests of the dashboard alone, with a fake probe (tests/app's publisher and command
# server): they need keel, Xvfb and xdotool, not keel-demo, so an app-only build runs them too.
# Included from tests/CMakeLists.txt whenever the app is built. Each runs alone (RUN_SERIAL), as
# the other GUI tests (e2e/CMakeLists.txt) and for the same reason.
find_program(KEEL_XVFB_RUN xvfb-run)
find_program(KEEL_XDOTOOL xdotool)
if(TARGET keel AND KEEL_XVFB_RUN AND KEEL_XDOTOOL)
  find_package(cppzmq REQUIRED)
  function(keel_add_app_gui_test name source)
    add_executable(${name} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/${source})
    target_include_directories(${name} SYSTEM PRIVATE /usr/include/stb)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/app ${PROJECT_SOURCE_DIR}/tests/e2e)
    target_link_libraries(${name} PRIVATE GTest::gtest_main keel_wire cppzmq)
    target_compile_definitions(${name} PRIVATE KEEL_PATH="$<TARGET_FILE:keel>")
    add_dependencies(${name} keel)
    add_test(NAME ${name} COMMAND ${KEEL_XVFB_RUN} -a -s "-screen 0 1600x1000x24" $<TARGET_FILE:${name}>)
    set_tests_properties(${name} PROPERTIES TIMEOUT 180 RUN_SERIAL TRUE)
  endfunction()
  # The Rewind button and its confirmation clicked for real, a fake probe's rewind drawn: the
  # continuation in colour over the abandoned span, greyed (issue 59).
  keel_add_app_gui_test(keel_rewind_gui_tests rewind_gui_test.cpp)
  # The forecaster's warning (issue 60): its banner and step marker from a live fake probe and
  # from a recording, Dismiss clicked for real, and --alert-command run from the dashboard.
  keel_add_app_gui_test(keel_warning_gui_tests warning_gui_test.cpp)
endif()
