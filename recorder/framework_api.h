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
#define GPURR_FRAMEWORK_API_VERSION 12
int gpurr_framework_api_version(void);

/* kind: 0 op, 1 autograd backward node, 2 user range, 3 the framework
 * benchmarking candidates (an autotuner timing kernels whose results it
 * discards: what runs inside is marked, FORMAT.md Origin.benchmarking;
 * reported whether the layer observes or not). in_place (an op's,
 * from its schema): 0 unknown, 1 it writes only its outputs, 2 it updates an
 * argument it takes (Tensor(a!) self, not an out= argument). */
void gpurr_framework_open_scope(const void* id, const char* name, int kind, int64_t sequence,
                                uint64_t sequence_thread, const char* file, uint32_t line, int in_place);
void gpurr_framework_close_scope(const void* id);
/* The device tensor arguments of the op (kind 0) whose scope `id` opened just
 * now on this thread, given when all of them are known: for each, its
 * storage's address and whether the op's schema says the op writes it
 * (written: 1 for Tensor(a!)). The op's launches then hash after them only
 * the ranges they may write (FORMAT.md, KernelLaunch.reads). */
void gpurr_framework_op_operands(const void* id, const uint64_t* addresses, const uint8_t* written,
                                 uint32_t count);
void gpurr_framework_enter_module(const char* path);
void gpurr_framework_exit_module(void);
/* 1 when this thread is inside a backward node in which a module was
 * entered since (a forward recomputed in the backward pass, as activation
 * checkpointing does): its ops are forward ops, which take the lines of the
 * code that calls them. */
int gpurr_framework_recomputing(void);
void gpurr_framework_set_step(int64_t step);
/* The layer is about to stop the program after training step `step`
 * (gpurr record --until-step): the trace's index records it. */
void gpurr_framework_stop_after_step(int64_t step);
/* The layer ends the program now, without the interpreter's teardown (gpurr
 * record --quick-exit): the recording ends as it would at the exit. */
void gpurr_framework_finish(void);
/* The program is ending on Ctrl-C (KeyboardInterrupt), after which Python
 * kills itself with SIGINT before the recorder's exit handler can run:
 * what was recorded so far is written to the trace, left open (it reads as
 * a recording that did not end cleanly, cut where the program stopped). */
void gpurr_framework_flush(void);
/* How launches, copies and sets take their origin (framework_context.h,
 * Attribution): 0 from what the layer reports; 1 so, and each step is kept,
 * the last complete one as the template; 2 from the template, by place in
 * the step (the layer then reports no ops or modules). Set between steps.
 * Returns 1, or 0 when 2 was asked and no complete step was kept. */
int gpurr_framework_attribution(int mode);
/* 1 when, since the last call, an operation found none of its kind and
 * kernel at its place in the template (then the layer learns again). */
int gpurr_framework_diverged(void);
/* Of the step that ended last (by gpurr_framework_set_step): 0 when it was
 * not learned whole (not in mode 1 from its start, or it had more than a
 * template holds), 1 when it became a template of a new kind of step, 2 when
 * it had the same operations as a template kept already. */
int gpurr_framework_step_learned(void);
/* Called once on the thread of the first operation that does not match the
 * template, inside that operation: the recorder has gone back to mode 1 and
 * the layer should observe again. */
void gpurr_framework_on_diverged(void (*observe)(void));
/* The framework's parameters (a model's weights): `count` (address, size)
 * pairs, each one parameter's bytes, replacing those given before. A launch
 * at a template's place must not point at another one than the template's
 * did there (framework_context.h, setParameters). */
void gpurr_framework_parameters(const uint64_t* ranges, uint32_t count);
/* `now` writes the calling thread's number (as sequence_thread) and its
 * autograd sequence counter; the recorder asks it at each step's start and
 * at some launches (framework_context.h, setSequenceSource). */
void gpurr_framework_sequence_source(void (*now)(uint64_t* thread, int64_t* sequence));
/* `enabled` says whether the calling thread records gradients now (1) or
 * not (0); asked at every launch, copy and set while the recorder learns or
 * follows steps (framework_context.h, setGradModeSource). */
void gpurr_framework_grad_mode_source(int (*enabled)(void));
/* allocated: 1 for a block handed out, 0 for one taken back (size ignored). */
void gpurr_framework_block(uint64_t address, uint64_t size, int allocated);

/* gpurr's buffer hash (FORMAT.md §8) of `size` host bytes at `data`. */
uint64_t gpurr_framework_hash_host(const void* data, uint64_t size);
/* Device memory that a framework's collective sends or receives (CUDA
 * tensors: `count` (address, size) pairs), hashed on `stream` (a CUstream;
 * 0 the legacy stream) behind the work enqueued there so far. Returns a
 * handle for gpurr_framework_collective's `device_inputs` or
 * `device_outputs`, which takes it, or 0 when nothing was hashed (a stream
 * being captured, memory the device cannot read, nothing recording). A
 * handle no call takes is given back with gpurr_framework_hash_drop. */
uint64_t gpurr_framework_hash_device(uint64_t stream, const uint64_t* ranges, uint32_t count);
void gpurr_framework_hash_drop(uint64_t handle);
/* A collective of the framework's (c10d's, any backend), recorded as a
 * Collective event of source `framework` (FORMAT.md): `call` its name, `op`
 * a trace::CollectiveOp value, `process_group` the group's name,
 * `communicator_key` text equal in every rank of the group (its name and
 * ranks: the event's communicator is its hash), `rank` and `size` this
 * process's in the group, `sequence` the framework's own number of the
 * collective (-1 none), `peer` the root or peer (-1 none). `inputs` and
 * `outputs` hold (address, size, digest) triples of the tensors the layer
 * lists itself: host tensors sent, hashed before, and received, hashed
 * after it completed; digest 0 for one not hashed (what an asynchronous
 * call receives, in host or device memory). `device_inputs` and `device_outputs`:
 * handles of gpurr_framework_hash_device (0 none), whose digests follow
 * the triples'; the event is on their stream. `file` and `line` the
 * program's line that called it. */
/* The collectives this thread issues from now on (`delta` 1, until -1;
 * nests) carry objects the framework serialised (torch.distributed's
 * *_object* calls, whose pickled tensors hold host addresses): recorded,
 * NCCL's included, without digests. */
void gpurr_framework_collectives_of_objects(int delta);
void gpurr_framework_collective(const char* call, int op, const char* process_group, const char* communicator_key,
                                int32_t rank, int32_t size, int64_t sequence, const char* data_type, uint64_t count,
                                const char* reduce_op, int32_t peer, const uint64_t* inputs, uint32_t input_count,
                                const uint64_t* outputs, uint32_t output_count, uint64_t device_inputs,
                                uint64_t device_outputs, const char* file, uint32_t line);
/* A synchronous collective of the framework's about to run, described as
 * gpurr_framework_collective's (`outputs` listed without digests;
 * `device_inputs` a handle the recorder takes only when it writes the call
 * itself), which may never return (ranks that issue other
 * collectives wait for good, or until the backend's timeout): the recorder
 * keeps it, with the calling thread's origin, and writes it as described if
 * the trace is flushed or closed first (a signal ends the program; it exits
 * from another thread). Returns a ticket for gpurr_framework_collective_done
 * (0: nothing kept). Found with dlsym: a recorder without it keeps none. */
uint64_t gpurr_framework_collective_pending(const char* call, int op, const char* process_group,
                                           const char* communicator_key, int32_t rank, int32_t size,
                                           int64_t sequence, const char* data_type, uint64_t count,
                                           const char* reduce_op, int32_t peer, const uint64_t* inputs,
                                           uint32_t input_count, const uint64_t* outputs, uint32_t output_count,
                                           uint64_t device_inputs, const char* file, uint32_t line);
/* The call of `ticket` returned or raised: 1 when the recorder still kept it
 * (record it with gpurr_framework_collective, or give its device handle
 * back), 0 when it wrote it already (with that handle). */
int gpurr_framework_collective_done(uint64_t ticket);

#ifdef __cplusplus
}
#endif

#endif
