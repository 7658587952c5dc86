# Fuzz targets. Each target file defines LLVMFuzzerTestOneInput; npusim_fuzz_target builds it twice:
#  - npusim-NAME-fuzz, a libFuzzer binary, with -DNPUSIM_LIBFUZZER=ON (clang; every library is then built with
#    ASan + UBSan and coverage instrumentation, so the fuzzer is guided through them and any fault stops it);
#  - npusim-NAME-fuzz-smoke, always: the target behind a bounded, deterministic driver (by default
#    tests/cpp/fuzz_corpus_driver.cpp, which replays a corpus directory and mutations of it) that ctest runs.
# docs/robustness.md tells how to run them.
option(NPUSIM_LIBFUZZER "build the npusim-*-fuzz libFuzzer binaries (needs clang; implies ASan + UBSan)" OFF)
if(NPUSIM_LIBFUZZER)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "NPUSIM_LIBFUZZER needs clang (e.g. -DCMAKE_CXX_COMPILER=clang++-14)")
  endif()
  if(NOT NPUSIM_SANITIZE)
    set(NPUSIM_SANITIZE "address,undefined" CACHE STRING "" FORCE)
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link
                      -fsanitize-coverage-ignorelist=${PROJECT_SOURCE_DIR}/cmake/fuzz_coverage_ignorelist.txt)
endif()

# npusim_fuzz_target(NAME SOURCES file... LIBRARIES target... [INCLUDES dir...] [SMOKE_DRIVER file])
function(npusim_fuzz_target name)
  cmake_parse_arguments(FUZZ "" "SMOKE_DRIVER" "SOURCES;LIBRARIES;INCLUDES" ${ARGN})
  if(NOT FUZZ_SMOKE_DRIVER)
    set(FUZZ_SMOKE_DRIVER ${PROJECT_SOURCE_DIR}/tests/cpp/fuzz_corpus_driver.cpp)
  endif()
  if(NPUSIM_LIBFUZZER)
    add_executable(npusim-${name}-fuzz ${FUZZ_SOURCES})
    target_compile_options(npusim-${name}-fuzz PRIVATE -fsanitize=fuzzer)
    target_link_options(npusim-${name}-fuzz PRIVATE -fsanitize=fuzzer)
    target_link_libraries(npusim-${name}-fuzz PRIVATE ${FUZZ_LIBRARIES})
    target_include_directories(npusim-${name}-fuzz PRIVATE ${FUZZ_INCLUDES})
  endif()
  add_executable(npusim-${name}-fuzz-smoke ${FUZZ_SMOKE_DRIVER} ${FUZZ_SOURCES})
  target_link_libraries(npusim-${name}-fuzz-smoke PRIVATE ${FUZZ_LIBRARIES})
  target_include_directories(npusim-${name}-fuzz-smoke PRIVATE ${FUZZ_INCLUDES})
endfunction()
