# Regenerates the golden trace pairs with make_diff_traces and checks that
# every file is byte for byte the checked-in one (trace writing is
# deterministic, so the pairs are reproducible from the generator).
#   cmake -DGENERATOR=... -DCASES=... -DOUT_DIR=... -P regenerate.cmake
file(REMOVE_RECURSE ${OUT_DIR})
execute_process(COMMAND ${GENERATOR} ${OUT_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_diff_traces failed (${rc})")
endif()
file(GLOB_RECURSE generated RELATIVE ${OUT_DIR} ${OUT_DIR}/*)
list(LENGTH generated n)
if(n EQUAL 0)
  message(FATAL_ERROR "make_diff_traces wrote nothing")
endif()
set(failed "")
foreach(f ${generated})
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT_DIR}/${f} ${CASES}/${f}
    RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    string(APPEND failed "  ${f}\n")
  endif()
endforeach()
# And nothing checked in that the generator no longer writes.
file(GLOB_RECURSE checked_in RELATIVE ${CASES} ${CASES}/*.gpurr/*)
foreach(f ${checked_in})
  string(REGEX REPLACE "/.*" "" case "${f}")
  if(EXISTS ${CASES}/${case}/a.txt)  # written by make_cli_case.sh
    continue()
  endif()
  if(NOT EXISTS ${OUT_DIR}/${f})
    string(APPEND failed "  ${f} (not written any more)\n")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "regenerated traces differ from the checked-in ones (run make_diff_traces tests/diff/cases to update):\n${failed}")
endif()
