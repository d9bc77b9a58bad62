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
#define SF_ABI_VERSION 4
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
 *   check_finite (0/1), device (cpu, or cuda: the groups' state in device
 *   memory of GPU `gpu`, default 0; sketch_allreduce, exchanged with
 *   sf_session_exchange_device).
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

/* Every scheme of the registry as JSON (sketchfuse_worker --list_schemes=json:
 * name, route, compressor, default compressor, traits), NUL-terminated in
 * `out`; 0 on success, nonzero with err set when out_size is too small. */
int sf_schemes_json(char* out, uint64_t out_size, char* err, uint64_t err_size);

typedef struct sf_session sf_session;
/* ops is copied; ops->user must outlive the session. */
sf_session* sf_session_create(const char* settings, const sf_collective_ops* ops, char* err, uint64_t err_size);
void sf_session_destroy(sf_session* session);

/* A session of a centralized or hybrid scheme (sketch_ps, topk_ps, dense_ps,
 * auto; the settings name the coordinator): joins the job with the model's
 * parameter sizes in backward order, as a sketchfuse_worker joins, and
 * aggregates whole steps (sf_session_exchange_step) over the job's groups.
 * Fails naming the cause: the coordinator unreachable within
 * join_timeout_s, a refusal (another run, a bad token), a rank mismatch. */
sf_session* sf_session_join(const char* settings, const uint64_t* layer_sizes, uint64_t num_layers,
                            const sf_collective_ops* ops, char* err, uint64_t err_size);
/* A joined session's step: grad and out hold the whole model (the layers of
 * sf_session_join, concatenated); out receives the mean update. */
int sf_session_exchange_step(sf_session* session, uint64_t step, const float* grad, uint64_t dim, float* out,
                             char* err, uint64_t err_size);
/* The session's groups (a joined session: the job's) and their sizes. */
int64_t sf_session_num_groups(sf_session* session);
uint64_t sf_session_group_dim(sf_session* session, int64_t group);

/* Writes the job configuration the servers of a centralized or hybrid hook
 * job read (sketchfuse_server --job_config=path) for a model of these
 * parameter sizes (backward order). 0 on success. */
int sf_write_job_config(const char* settings, const uint64_t* layer_sizes, uint64_t num_layers, const char* path,
                        char* err, uint64_t err_size);

/* A new fused group of `dim` elements with fresh state; returns its index. */
int64_t sf_session_add_group(sf_session* session, uint64_t dim, char* err, uint64_t err_size);

/* Aggregates `group`'s gradient `grad` (dim floats; params: the group's
 * parameter values, or NULL when the scheme does not need them) among the
 * ranks for step `step` (the same on every rank), writes the mean update
 * (dim floats, zero where nothing was selected) into `out`, and settles the
 * group's error feedback as applied. A non-finite gradient (with
 * check_finite) is exchanged as zeros and reported by sf_session_finish_step. */
int sf_session_exchange(sf_session* session, int64_t group, uint64_t step, const float* grad, const float* params,
                        uint64_t dim, float* out, char* err, uint64_t err_size);

/* sf_session_exchange for a session of device=cuda: grad and out are `dim`
 * floats of CUDA device memory on the session's GPU (grad written by work
 * the caller has completed, e.g. after synchronizing its stream); out holds
 * the mean update when this returns. Error feedback, selection, sketching and
 * decoding run on the GPU; the sketch crosses to the host for the
 * collectives. Fails for a session of device=cpu (and sf_session_exchange
 * fails for one of device=cuda). */
int sf_session_exchange_device(sf_session* session, int64_t group, uint64_t step, const float* grad, float* out,
                               uint64_t dim, char* err, uint64_t err_size);

/* After the last exchange of `step` (every rank calls it): with
 * check_finite, fails on every rank ("diverged: non-finite gradient at step
 * S on rank R ...") when any rank's gradient of the step was not finite; such
 * a gradient was exchanged as zeros. One allreduce of world_size floats. */
int sf_session_finish_step(sf_session* session, uint64_t step, char* err, uint64_t err_size);

/* The group's state, by part: entry 0 the error-feedback residual, 1 the
 * velocity, 2 the method's own state (FetchSGD's momentum and error
 * sketches); sf_session_state_size gives each part's length (0: not kept).
 * Restore refuses (non-zero, err set, nothing changed) a part that does not
 * fit. */
uint64_t sf_session_state_size(sf_session* session, int64_t group, int entry);
int sf_session_save_state(sf_session* session, int64_t group, float* residual, float* velocity, float* method_state,
                          char* err, uint64_t err_size);
int sf_session_restore_state(sf_session* session, int64_t group, const float* residual, uint64_t residual_size,
                             const float* velocity, uint64_t velocity_size, const float* method_state,
                             uint64_t method_state_size, char* err, uint64_t err_size);

/* Counters as a JSON object (steps, exchanges, bytes_sent, bytes_received, dense_bytes,
 * compress_s, communicate_s, decode_s, check_s, peel_recovered_share (null
 * without peeled sketches), warnings (an array of strings)). 0 on success;
 * non-zero when it does not fit out_size. */
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
