# The app's layering, checked on its sources (cmake -P, with -DAPP_DIR=<repo>/app):
#   values <- net <- core,   values <- ui <- core,   model <- ui,   net <- cli,   values <- text <- cli,
#   text <- alert <- cli,   alert <- core
# Views own no socket: ui includes neither net/ nor ZeroMQ, and only core (the main part)
# includes both sides. A file that reaches across fails the test with its line.
cmake_minimum_required(VERSION 3.16)
if(NOT APP_DIR)
  message(FATAL_ERROR "pass -DAPP_DIR=<repository>/app")
endif()

set(app_folders values net text alert model ui core cli)
set(allowed_values values)
set(allowed_net net values)
set(allowed_text text values)
set(allowed_alert alert text values)
set(allowed_model model)
set(allowed_ui ui model values)
set(allowed_core core ui net model values alert)
set(allowed_cli cli net text alert values)
# Libraries a folder must not include: sockets stay in net/ (and the headless cli), ImGui in ui/;
# text/ only turns messages into words, alert/ only runs commands for what it is handed.
set(forbidden_values "<zmq.hpp" "<imgui.h" "<torch/")
set(forbidden_net "<imgui.h" "<torch/")
set(forbidden_text "<zmq.hpp" "<imgui.h" "<torch/")
set(forbidden_alert "<zmq.hpp" "<imgui.h" "<torch/")
set(forbidden_model "<zmq.hpp" "<imgui.h" "<torch/")
set(forbidden_ui "<zmq.hpp" "<torch/")
set(forbidden_core "<zmq.hpp" "<torch/")
set(forbidden_cli "<imgui.h" "<torch/")

include(${CMAKE_CURRENT_LIST_DIR}/../layering_check.cmake)
set(violations "")
keel_check_layering("${APP_DIR}" "${app_folders}" violations files_checked)

if(violations)
  message(FATAL_ERROR "the app's layering is broken:${violations}")
endif()
message(STATUS "app layering holds in ${files_checked} files")
