# Sanitizer and fuzzing builds (issue 22), for a build folder of their own:
#   -DONECARD_SANITIZE=address,undefined   ASan + UBSan on everything built
#   -DONECARD_SANITIZE=thread              TSan
#   -DONECARD_FUZZ=ON (clang)              ASan + UBSan, and tests/fuzz's
#                                          targets linked with libFuzzer
# scripts/sanitize.sh and scripts/fuzz.sh configure and run them. Third-party
# libraries (absl, gRPC, protobuf) come from Debian, uninstrumented.
set(ONECARD_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread")
option(ONECARD_FUZZ "Build tests/fuzz with libFuzzer (clang), ASan and UBSan" OFF)

if(ONECARD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ONECARD_FUZZ needs clang (CXX=clang++): libFuzzer is clang's")
  endif()
  set(ONECARD_SANITIZE "address,undefined")
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(ONECARD_SANITIZE)
  add_compile_options(-fsanitize=${ONECARD_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${ONECARD_SANITIZE})
endif()
