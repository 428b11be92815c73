# Clang's thread-safety analysis over the tuner's and the agent's annotated
# sources (ABSL_GUARDED_BY and friends, absl/base/thread_annotations.h).
#
#   cmake -DCLANGXX=clang++ -DBUILD_DIR=build -DSOURCE_DIR=. -P cmake/ThreadSafetyCheck.cmake
#
# Takes each non-test tuner/ and agent/ source whose text or header includes
# thread_annotations.h from BUILD_DIR/compile_commands.json (so the build must
# have generated the protobuf headers) and compiles it with the same flags
# plus `-fsyntax-only -Werror=thread-safety`. Fails on any thread-safety
# warning, and also when clang does not flag a known violation (a probe), so
# the check cannot pass by analysing nothing. Prints SKIPPED without clang++.
cmake_minimum_required(VERSION 3.20)
if(NOT CLANGXX)
  message("SKIPPED: no clang++; the thread-safety analysis needs it")
  return()
endif()
foreach(var BUILD_DIR SOURCE_DIR)
  get_filename_component(${var} "${${var}}" ABSOLUTE)
endforeach()

set(flags -fsyntax-only -Wthread-safety -Werror=thread-safety)

# The probe: an unguarded read must be an error under these flags.
set(probe ${BUILD_DIR}/thread_safety_probe.cc)
file(WRITE ${probe} "#include \"absl/synchronization/mutex.h\"\n"
  "struct Probe { absl::Mutex mu; int x ABSL_GUARDED_BY(mu) = 0; int Get() { return x; } };\n")
execute_process(COMMAND ${CLANGXX} -std=c++17 ${flags} ${probe}
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "requires holding mutex")
  message(FATAL_ERROR "${CLANGXX} did not flag an unguarded read in ${probe}:\n${err}")
endif()

file(READ ${BUILD_DIR}/compile_commands.json json)
string(JSON count LENGTH "${json}")
math(EXPR last "${count} - 1")
set(checked)
set(failed)
foreach(i RANGE ${last})
  string(JSON source GET "${json}" ${i} file)
  string(FIND "${source}" "${SOURCE_DIR}/tuner/" in_tuner)
  string(FIND "${source}" "${SOURCE_DIR}/agent/" in_agent)
  if((NOT in_tuner EQUAL 0 AND NOT in_agent EQUAL 0) OR source MATCHES "_test\\.cc$"
     OR source IN_LIST checked)
    continue()
  endif()
  file(READ ${source} text)
  string(REGEX REPLACE "\\.cc$" ".h" header "${source}")
  if(EXISTS ${header})
    file(READ ${header} header_text)
    string(APPEND text "${header_text}")
  endif()
  if(NOT text MATCHES "absl/base/thread_annotations\\.h")
    continue()
  endif()
  list(APPEND checked ${source})
  string(JSON command GET "${json}" ${i} command)
  string(JSON directory GET "${json}" ${i} directory)
  separate_arguments(args UNIX_COMMAND "${command}")
  list(REMOVE_AT args 0)  # the compiler
  list(FIND args -o out)
  if(out GREATER_EQUAL 0)
    list(REMOVE_AT args ${out})
    list(REMOVE_AT args ${out})
  endif()
  list(REMOVE_ITEM args -c)
  execute_process(COMMAND ${CLANGXX} ${args} ${flags}
    WORKING_DIRECTORY ${directory} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(RELATIVE_PATH name ${SOURCE_DIR} ${source})
  if(NOT rc EQUAL 0 OR err MATCHES "-Wthread-safety")
    list(APPEND failed ${name})
    message("${name}: FAILED\n${err}")
  else()
    message("${name}: clean")
  endif()
endforeach()

list(LENGTH checked n)
if(n EQUAL 0)
  message(FATAL_ERROR "no annotated tuner/ or agent/ source in ${BUILD_DIR}/compile_commands.json")
endif()
if(failed)
  message(FATAL_ERROR "thread-safety analysis failed for: ${failed}")
endif()
message("${n} annotated sources clean under ${CLANGXX} -Wthread-safety")
