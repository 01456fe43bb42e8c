/* The C functions libgpurr_recorder.so exports for gpurr's framework layer
 * (framework/): the PyTorch side opens it by path (GPURR_RECORDER_LIBRARY,
 * set by `gpurr record`), before or after the driver injects it: both load
 * the same copy. Every call is cheap and never fails; see
 * framework_context.h for what each argument means. */
#ifndef GPURR_RECORDER_FRAMEWORK_API_H
#define GPURR_RECORDER_FRAMEWORK_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these functions' contract; a framework layer that expects
 * another one attributes nothing. */
#define GPURR_FRAMEWORK_API_VERSION 1
int gpurr_framework_api_version(void);

/* kind: 0 op, 1 autograd backward node, 2 user range. */
void gpurr_framework_open_scope(const void* id, const char* name, int kind, int64_t sequence,
                                uint64_t sequence_thread, const char* file, uint32_t line);
void gpurr_framework_close_scope(const void* id);
void gpurr_framework_enter_module(const char* path);
void gpurr_framework_exit_module(void);
void gpurr_framework_set_step(int64_t step);
/* allocated: 1 for a block handed out, 0 for one taken back (size ignored). */
void gpurr_framework_block(uint64_t address, uint64_t size, int allocated);

#ifdef __cplusplus
}
#endif

#endif
