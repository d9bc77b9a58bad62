/* The C ABI of SketchFuse's training front ends (the PyTorch DDP hook of
 * python/sketchfuse/torch.py loads it with ctypes).
 *
 * It deliberately knows nothing of PyTorch or Python: tensors cross as
 * pointers and sizes of float32 host memory, settings as text, and the
 * collectives of the decentralized schemes are callbacks the caller
 * implements over its own process group (sf_collective_ops). One native
 * library therefore serves any PyTorch version and any Python.
 *
 * Contract:
 *  - Every function that can fail returns 0 (or a valid pointer / a group
 *    index >= 0) on success; on failure it writes a NUL-terminated message
 *    naming the problem into err (at most err_size bytes, truncated) and
 *    returns nonzero (or NULL, or -1). Nothing is changed by a failed call.
 *  - A session is used from one thread at a time.
 *  - Callbacks return 0 on success, nonzero on failure (the session then
 *    fails the exchange with UNAVAILABLE; the caller keeps its own exception).
 *  - Memory given to a callback is valid only during the callback; data a
 *    callback returns is copied in with sf_bytes_assign.
 */
#ifndef SKETCHFUSE_WORKER_HOOK_SKETCHFUSE_C_H_
#define SKETCHFUSE_WORKER_HOOK_SKETCHFUSE_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a signature or a struct below changes. */
#define SF_ABI_VERSION 1
int sf_abi_version(void);

/* A byte buffer owned by the library, filled by a callback. */
typedef struct sf_bytes sf_bytes;
void sf_bytes_assign(sf_bytes* bytes, const void* data, uint64_t size);

/* The collectives of the caller's process group; every rank calls them in the
 * same order (see worker/collective/collective.h for the semantics). */
typedef struct {
  void* user;
  /* data[i] = sum over ranks of data[i]; the same bits on every rank. */
  int (*all_reduce_sum_f32)(void* user, float* data, uint64_t count);
  /* Every rank's bytes in rank order into *all; sizes[r] = rank r's size. */
  int (*all_gather_bytes)(void* user, const void* mine, uint64_t size, sf_bytes* all, uint64_t* sizes);
  /* Rank root's `size` bytes copied to every rank's data. */
  int (*broadcast_bytes)(void* user, void* data, uint64_t size, int root);
  int (*barrier)(void* user);
  int (*send_bytes)(void* user, const void* data, uint64_t size, int peer, uint32_t tag);
  int (*recv_bytes)(void* user, sf_bytes* out, int peer, uint32_t tag);
  /* Sends to send_to and receives from recv_from at once. */
  int (*send_recv_bytes)(void* user, const void* data, uint64_t size, int send_to, int recv_from, uint32_t tag,
                         sf_bytes* out);
} sf_collective_ops;

/* Settings are "key=value" lines (the value is the rest of the line):
 *   scheme, compressor (empty: the scheme's default), rank, world_size, seed,
 *   momentum, error_feedback (0/1), release_cap, second_round (0/1),
 *   check_finite (0/1).
 * sf_check_settings validates them without creating anything (no
 * communication); the message names the first bad key. */
int sf_check_settings(const char* settings, char* err, uint64_t err_size);
/* The resolved settings (defaults filled in, the compressor resolved) as
 * "key=value" lines, for comparing ranks; 0 on success. */
int sf_resolved_settings(const char* settings, char* out, uint64_t out_size, char* err, uint64_t err_size);

/* The scheme's traits: *compresses (1: the hook keeps momentum and error
 * feedback, so the optimizer must not add momentum; 0: a dense scheme, the
 * optimizer keeps momentum) and *needs_parameters (1: pass the group's
 * parameter values to sf_session_exchange). 0 on success. */
int sf_scheme_traits(const char* scheme, int* compresses, int* needs_parameters, char* err, uint64_t err_size);

typedef struct sf_session sf_session;
/* ops is copied; ops->user must outlive the session. */
sf_session* sf_session_create(const char* settings, const sf_collective_ops* ops, char* err, uint64_t err_size);
void sf_session_destroy(sf_session* session);

/* A new fused group of `dim` elements with fresh state; returns its index. */
int64_t sf_session_add_group(sf_session* session, uint64_t dim, char* err, uint64_t err_size);

/* Aggregates `group`'s gradient `grad` (dim floats; params: the group's
 * parameter values, or NULL when the scheme does not need them) among the
 * ranks for step `step` (the same on every rank), writes the mean update
 * (dim floats, zero where nothing was selected) into `out`, and settles the
 * group's error feedback as applied. */
int sf_session_exchange(sf_session* session, int64_t group, uint64_t step, const float* grad, const float* params,
                        uint64_t dim, float* out, char* err, uint64_t err_size);

/* The group's state: entry 0 the error-feedback residual, 1 the velocity
 * (or FetchSGD's error and momentum sketches); sf_session_state_size gives
 * each entry's length (0: not kept). */
uint64_t sf_session_state_size(sf_session* session, int64_t group, int entry);
int sf_session_save_state(sf_session* session, int64_t group, float* residual, float* velocity, char* err,
                          uint64_t err_size);
int sf_session_restore_state(sf_session* session, int64_t group, const float* residual, uint64_t residual_size,
                             const float* velocity, uint64_t velocity_size, char* err, uint64_t err_size);

/* Counters as a JSON object (steps, exchanges, bytes_sent, dense_bytes,
 * compress_s, communicate_s, decode_s, check_s). 0 on success. */
int sf_session_stats_json(sf_session* session, char* out, uint64_t out_size);

/* The fusion planner's groups (common/fusion_planner.h, mode "optimal", as
 * the worker plans) for layers of `layer_sizes` elements in backward order
 * under the settings' scheme and compressor: writes at most max_groups group
 * sizes (elements, in backward order) to groups and returns the number of
 * groups, or -1 with err set. For choosing DDP's bucket_cap_mb. */
int64_t sf_plan_groups(const uint64_t* layer_sizes, uint64_t num_layers, const char* settings, uint64_t* groups,
                       uint64_t max_groups, char* err, uint64_t err_size);

/* The order a sketchfuse_worker of `rank` visits its n training examples in
 * `epoch` (worker/training/epoch_order.h): out receives a permutation of
 * [0, n). For front ends that reproduce a worker's run. 0 on success. */
int sf_epoch_order(uint64_t seed, int rank, int64_t epoch, int64_t n, int64_t* out);

#ifdef __cplusplus
}
#endif

#endif /* SKETCHFUSE_WORKER_HOOK_SKETCHFUSE_C_H_ */
