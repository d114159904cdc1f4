# onecard_test(NAME SRCS <files> LIBS <targets> LABELS <labels> [TIMEOUT s])
# One gtest binary per source file, registered with ctest under its labels
# (unit, golden, integration, slow, gpu). Tests run from the source root so
# that paths like tests/golden/... and models/... resolve.
include(GoogleTest)
function(onecard_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SRCS;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SRCS})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock
                        GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "ONECARD_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
