# onecard_inspect: the `onecard inspect MODEL` subcommand (inspect_command.cc),
# kept with the model-loading work; included by tools/onecard/CMakeLists.txt.
# Its test is registered in tests/engine/model/CMakeLists.txt.
add_library(onecard_inspect ${CMAKE_CURRENT_LIST_DIR}/inspect_command.cc)
target_include_directories(onecard_inspect PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(onecard_inspect PUBLIC onecard_model absl::status absl::strings
                      absl::str_format)
