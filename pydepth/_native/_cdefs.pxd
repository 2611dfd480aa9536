# SPDX-License-Identifier: MIT
# Declarations of the C core; nothing here runs.
from libc.stdint cimport uint64_t, int64_t, uint8_t

cdef extern from "pd_error.h":
    ctypedef enum pd_status:
        PD_OK
        PD_ERR_OVERFLOW
        PD_ERR_SHAPE
        PD_ERR_LAYOUT
        PD_ERR_EMPTY
        PD_ERR_NO_LOSS
        PD_ERR_LOSS_ATTACHED
        PD_ERR_INTERRUPTED
        PD_STATUS_COUNT
    ctypedef struct pd_error:
        pd_status code
        size_t index
        double value
        int block
        int node
    const char *pd_status_name(int code)

cdef extern from "platform/pd_rwlock.h":
    ctypedef struct pd_rwlock:
        pass
    pd_rwlock *pd_rwlock_new()
    void pd_rwlock_free(pd_rwlock *l)
    void pd_rwlock_lock_shared(pd_rwlock *l) nogil
    void pd_rwlock_unlock_shared(pd_rwlock *l) nogil
    void pd_rwlock_lock(pd_rwlock *l) nogil
    void pd_rwlock_unlock(pd_rwlock *l) nogil
    void pd_rwlock_reset(pd_rwlock *l)

cdef extern from "pd_nodes.h":
    enum: PD_N_COUNT, PD_N_LOSS, PD_N_PER_TARGET_NLL
    int pd_node_kind_info(int kind, const char **ident, const char **name, const char **scope)
    int pd_node_kept_lean(int kind)

cdef extern from "pd_rng.h":
    ctypedef struct pd_rng:
        uint64_t state
    uint64_t pd_rng_next_u64(pd_rng *rng) nogil
    double pd_rng_next_unit_f64(pd_rng *rng) nogil

cdef extern from "pd_init.h":
    ctypedef struct pd_xavier_scale:
        size_t fan_in, fan_out
        double target_variance, standard_deviation, uniform_limit
    pd_status pd_xavier_scale_of(size_t fan_in, size_t fan_out, pd_xavier_scale *out, pd_error *e)
    pd_status pd_xavier_fill(const pd_xavier_scale *s, pd_rng *rng, double *out, pd_error *e) nogil
    pd_status pd_validate_name(const char *name, size_t len, pd_error *e)

cdef extern from "kernels/gemm.h":
    void pd_mm_nn(size_t M, size_t K, size_t N, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc, int acc) nogil
    void pd_mm_nt(size_t M, size_t K, size_t N, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc, int acc) nogil
    void pd_mm_tn(size_t M, size_t K, size_t N, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc, int acc) nogil
    const char *pd_kernel_path() nogil
    int pd_force_kernel_path(const char *name) nogil
    int pd_avx512_folds() nogil
    void pd_force_avx512_fold(int mode) nogil

cdef extern from "ops/attn_rows.h":
    ctypedef struct pd_attn_rows:
        size_t T, i0, i1
        const uint8_t *valid
        const size_t *s0
        double kappa
    int pd_attn_softmax_rows(const pd_attn_rows *r, double *w, size_t *bad_at, double *bad) nogil
    void pd_attn_softmax_vjp_rows(const pd_attn_rows *r, const double *w, double *ds) nogil

cdef extern from "kernels/pool.h":
    void pd_set_num_threads(int n) nogil
    int pd_get_num_threads() nogil

cdef extern from "pd_tensor.h":
    int pd_can_allocate(size_t n) nogil

cdef extern from "pd_checksum.h":
    size_t pd_values_checksum(const double *x, size_t n) nogil

cdef extern from "pd_interrupt.h":
    ctypedef int (*pd_interrupt_fn)(int final) noexcept nogil
    void pd_set_interrupt_check(pd_interrupt_fn fn)
    pd_interrupt_fn pd_get_interrupt_check()

cdef extern from "pd_decoder.h":
    ctypedef struct pd_config:
        size_t vocabulary_size, model_width, heads, kv_heads, feed_forward_width, layers, max_positions
        double rope_base, rms_epsilon
    ctypedef struct pd_param:
        double *value
        double *grad
        size_t size
        uint64_t revision
        int grad_zero
    ctypedef struct pd_model:
        pd_config cfg
        size_t head_width, kv_width, n_params
    ctypedef struct pd_graph:
        size_t N
        int recorded, lean, has_loss
        double loss
        size_t *checksums
    pd_status pd_config_validate(const pd_config *c, pd_error *e)
    const char *pd_config_check_rule(size_t index)
    pd_status pd_config_parameter_count(const pd_config *c, size_t *count, pd_error *e)
    pd_status pd_param_alloc(pd_param *p, size_t n)
    void pd_param_release(pd_param *p)
    pd_status pd_param_shape(const pd_config *c, size_t i, size_t *rank, size_t dims[2])
    size_t pd_param_name(const pd_config *c, size_t i, char *buf, size_t cap)
    size_t pd_param_tensor_count(const pd_config *c)
    pd_status pd_draw_parameters(const pd_config *c, double **values, pd_rng *rng, pd_error *e) nogil
    pd_status pd_params_check(const pd_config *c, pd_param **params, size_t n, pd_error *e)
    pd_status pd_model_init(pd_model *m, const pd_config *c, pd_param **params, pd_error *e)
    void pd_model_free(pd_model *m)
    pd_status pd_model_set_branch(pd_model *m, const double *mu, pd_error *e)
    double pd_model_branch(const pd_model *m, size_t b)
    enum: PD_RECORD_NONE, PD_RECORD_ALL, PD_RECORD_TRAINING
    pd_status pd_graph_forward(pd_graph *g, const pd_model *m, size_t B, size_t T, const int64_t *ids,
                               const uint8_t *valid, const size_t *pos, const size_t *seg_start,
                               int record, pd_error *e) nogil
    pd_status pd_check_ids(const int64_t *ids, const uint8_t *valid, size_t n, size_t V, int targets,
                           pd_error *e) nogil
    pd_status pd_graph_loss(pd_graph *g, const int64_t *targets, pd_error *e) nogil
    void pd_graph_free(pd_graph *g) nogil
    double *pd_graph_value(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4])
    int pd_graph_value_shape(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4])

cdef extern from "pd_backward.h":
    pd_status pd_graph_backward(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                                double **out, uint8_t *found, pd_error *e) nogil
    pd_status pd_graph_backward_pass(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                                     double **out, uint8_t *found, int mode, pd_error *e) nogil

cdef extern from "pd_grad_txn.h":
    enum:
        PD_PASS_WAIT
        PD_PASS_COMMIT
        PD_PASS_WAIT_IN_PLACE
    pd_status pd_graph_commit(pd_graph *g, pd_error *e) nogil
    void pd_graph_discard(pd_graph *g) nogil

cdef extern from "optim/pd_optim.h":
    ctypedef struct pd_optim_tensor:
        pd_param *param
        double *slot[2]

cdef extern from "optim/pd_sgd.h":
    ctypedef struct pd_sgd_hparams:
        double lr, momentum, weight_decay
    pd_status pd_sgd_check(const pd_sgd_hparams *h, pd_error *e)
    pd_status pd_sgd_step(const pd_optim_tensor *t, size_t n, const pd_sgd_hparams *h, size_t nh,
                          uint64_t step, pd_error *e) nogil

cdef extern from "optim/pd_adamw.h":
    ctypedef struct pd_adamw_hparams:
        double lr, beta1, beta2, eps, weight_decay
    pd_status pd_adamw_check(const pd_adamw_hparams *h, pd_error *e)
    pd_status pd_adamw_step(const pd_optim_tensor *t, size_t n, const pd_adamw_hparams *h, size_t nh,
                            uint64_t step, pd_error *e) nogil

cdef extern from "pd_grad.h":
    void pd_grad_zero(pd_param *p) nogil
    void pd_grads_zero(pd_param **params, size_t n) nogil
    void pd_grad_set(pd_param *p, const double *src) nogil

cdef extern from "pd_rms.h":
    ctypedef struct pd_rms_array:
        const void *data
        int dtype
        double scale
        double sum
        int in_range
    int PD_RMS_FLOAT32
    int PD_RMS_FLOAT64
    void pd_rms_sums(pd_rms_array *arrays, size_t count, const unsigned char *valid, size_t positions,
                     size_t features, double limit) nogil

cdef extern from "pd_step.h":
    ctypedef struct pd_step_plan:
        int planned
    ctypedef struct pd_batch_in:
        size_t B, T
        const int64_t *ids
        const uint8_t *valid
        const size_t *pos
        const size_t *seg_start
    ctypedef struct pd_step_batch:
        pd_batch_in in_ "in"
        const int64_t *targets
    ctypedef pd_status (*pd_step_update_fn)(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh,
                                            uint64_t step, pd_error *e) noexcept nogil
    ctypedef struct pd_step_update:
        pd_step_update_fn apply
        const pd_optim_tensor *tensors
        size_t n, nh
        const void *hparams
        uint64_t step
    pd_status pd_step_sgd(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh, uint64_t step,
                          pd_error *e) noexcept nogil
    pd_status pd_step_adamw(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh, uint64_t step,
                            pd_error *e) noexcept nogil
    enum: PD_STEP_FORWARD, PD_STEP_LOSS, PD_STEP_BACKWARD, PD_STEP_UPDATE
    pd_status pd_train_step(pd_step_plan *plan, const pd_model *m, const pd_step_batch *batch,
                            const pd_step_update *update, double *loss, int *stage, pd_error *e) nogil
    void pd_step_plan_free(pd_step_plan *plan) nogil
