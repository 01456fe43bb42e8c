# Writes OUT, a header that defines GPURR_COMMIT as the source tree's commit
# (SRC; "-dirty" when tracked files changed since, "unknown" outside git),
# rewriting it only when that changed: run at every build, so that
# `gpurr --version` names the commit built, not the one configured.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND commit "-dirty")
  endif()
endif()
file(WRITE ${OUT}.new "#define GPURR_COMMIT \"${commit}\"\n")
file(COPY_FILE ${OUT}.new ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.new)
