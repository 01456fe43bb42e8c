# Checks that the reports quoted in docs/DIFF.md are, verbatim, the expected
# output of their golden cases.
file(READ ${DOC} doc)
foreach(case nondeterministic_kernel two_independent environment algorithm_choice pointer_parameter)
  file(READ ${CASES}/${case}/expected.txt report)
  string(FIND "${doc}" "${report}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "docs/DIFF.md no longer shows the report of tests/diff/cases/${case}; "
                        "paste ${CASES}/${case}/expected.txt into it")
  endif()
endforeach()
