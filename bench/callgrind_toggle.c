/* libgpurr_callgrind_toggle.so: lets a Python benchmark count under callgrind
 * only the instructions of the part it measures (bench/layer_cost.py):
 * instrumentation starts at gpurr_cg_start, collection is toggled around the
 * measured steps. Outside valgrind every call does nothing. */
#include <valgrind/callgrind.h>

__attribute__((visibility("default"))) void gpurr_cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
__attribute__((visibility("default"))) void gpurr_cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
