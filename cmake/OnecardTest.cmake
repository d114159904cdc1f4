# onecard_test(NAME SRCS <files> LIBS <targets> LABELS <labels> [TIMEOUT s])
# One gtest binary per source file, registered with ctest under its labels
# (unit, golden, integration, slow, gpu). Tests run from the source root so
# that paths like tests/golden/... and models/... resolve.
#
# ONECARD_TEST_TIME_SCALE (default 1): a sanitizer build's slowdown, set by
# scripts/sanitize.sh. Above 1 it multiplies each test's ctest TIMEOUT and is
# compiled into the tests (onecard_test_time_scale) for
# tests/testing/time_scale.h, which scales their deadlines and time windows.
# A normal build compiles nothing different.
include(GoogleTest)
set(ONECARD_TEST_TIME_SCALE 1 CACHE STRING
    "Multiplier for tests' deadlines and ctest timeouts (sanitizer builds)")
if(NOT ONECARD_TEST_TIME_SCALE MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "ONECARD_TEST_TIME_SCALE must be a positive integer")
endif()

# Compiles the scale into a test or a test-support library (PUBLIC: it
# reaches the tests linking it) when it is above 1.
function(onecard_test_time_scale target scope)
  if(ONECARD_TEST_TIME_SCALE GREATER 1)
    target_compile_definitions(${target} ${scope}
                               ONECARD_TEST_TIME_SCALE=${ONECARD_TEST_TIME_SCALE})
  endif()
endfunction()

function(onecard_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SRCS;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SRCS})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock
                        GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  onecard_test_time_scale(${name} PRIVATE)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${ONECARD_TEST_TIME_SCALE}")
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "ONECARD_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
