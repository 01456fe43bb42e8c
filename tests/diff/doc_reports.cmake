# Checks that the reports quoted in a document (DOC: docs/DIFF.md, the
# README) are, verbatim, the expected output of their golden cases
# (DOC_CASES, separated by commas).
file(READ ${DOC} doc)
string(REPLACE "," ";" cases "${DOC_CASES}")
foreach(case ${cases})
  file(READ ${CASES}/${case}/expected.txt report)
  string(FIND "${doc}" "${report}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${DOC} no longer shows the report of tests/diff/cases/${case}; "
                        "paste ${CASES}/${case}/expected.txt into it")
  endif()
endforeach()
