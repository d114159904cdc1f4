# onecard_remote_generate: `onecard generate --target` (remote_generate.cc),
# kept with the worker service work; included by tools/onecard/CMakeLists.txt
# (and by tests/services/worker when the CLI does not include it yet).
if(NOT TARGET onecard_remote_generate)
  add_library(onecard_remote_generate ${CMAKE_CURRENT_LIST_DIR}/remote_generate.cc)
  target_include_directories(onecard_remote_generate PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(onecard_remote_generate
                        PUBLIC onecard_proto onecard_services_common gRPC::grpc++ absl::status
                               absl::statusor absl::strings absl::time)
endif()
