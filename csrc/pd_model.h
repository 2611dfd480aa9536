/* SPDX-License-Identifier: MIT */
/* Decoder configuration, the parameter layout read from its tables (pd_params.h), the draws of
 * initialization and the model a forward runs (pd_model.c). */
#ifndef PD_MODEL_H
#define PD_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "pd_error.h"
#include "pd_params.h"
#include "pd_rng.h"
#include "pd_shapes.h"

typedef struct {
    size_t vocabulary_size, model_width, heads, kv_heads, feed_forward_width, layers, max_positions;
    double rope_base, rms_epsilon;
} pd_config;

/* One parameter tensor: values, accumulated gradient, value revision. */
typedef struct pd_param_s {
    double *value;
    double *grad;
    size_t size;
    uint64_t revision;
    int grad_zero; /* 1 only while every grad element is +0.0: kept by pd_grad.h and pd_grad_txn.h */
    void *blocks[2]; /* what pd_param_alloc allocated for value and grad: pd_param_release frees them */
} pd_param;

typedef struct {
    pd_config cfg;
    size_t head_width, kv_width, n_params;
    pd_param **params;           /* borrowed, in declaration order (pd_params.h) */
    uint8_t *shared;             /* [n_params]: another slot names the same parameter */
    double *rope_sin, *rope_cos; /* [max_positions, head_width/2] */
    double *branch;              /* [layers] residual-branch multipliers (numerics.md §5.9); NULL: all 1.0 */
} pd_model;

/* The configuration checks, X(index, rule): pd_config_validate runs them in the reference's
 * order (1-5, 10, 6-9) and reports the failed one's index. */
#define PD_CONFIG_CHECKS(X)                                   \
    X(1, "vocabulary_size must be positive")                  \
    X(2, "model_width must be positive")                      \
    X(3, "heads must be positive")                            \
    X(4, "model_width must be divisible by heads")            \
    X(5, "head width must be even")                           \
    X(6, "feed_forward_width must be positive")               \
    X(7, "max_positions must be positive")                    \
    X(8, "rope_base must be finite and positive")             \
    X(9, "rms_epsilon must be finite and non-negative")       \
    X(10, "kv_heads must be positive and divide heads")

pd_status pd_config_validate(const pd_config *c, pd_error *e);
/* The rule of configuration check `index`; NULL when no check has that index. */
const char *pd_config_check_rule(size_t index);
/* The extents (pd_shapes.h) of a valid configuration over a B x T batch (0, 0 for parameters). */
void pd_config_extents(const pd_config *c, size_t B, size_t T, size_t x[PD_X_COUNT]);
pd_status pd_config_parameter_count(const pd_config *c, size_t *count, pd_error *e);
/* Shape of parameter i (docs/numerics.md §3.1): rank (1 or 2) and dims. */
pd_status pd_param_shape(const pd_config *c, size_t i, size_t *rank, size_t dims[2]);
/* Name of parameter i written into buf (NUL-terminated, truncated to cap); returns its length. */
size_t pd_param_name(const pd_config *c, size_t i, char *buf, size_t cap);
size_t pd_param_tensor_count(const pd_config *c);

/* Fills values[i] (sized per pd_param_shape) in the reference draw order from a trial copy
 * of *rng; *rng advances only when everything succeeded. */
pd_status pd_draw_parameters(const pd_config *c, double **values, pd_rng *rng, pd_error *e);

/* Checks that params holds exactly the layout's n tensors with the layout's sizes (index = the
 * first offender); c must already be valid and its parameter count checked. */
pd_status pd_params_check(const pd_config *c, pd_param *const *params, size_t n, pd_error *e);

pd_status pd_model_init(pd_model *m, const pd_config *c, pd_param **params, pd_error *e);
void pd_model_free(pd_model *m);

/* Sets every block's residual-branch multiplier from mu[layers] (copied; all 1.0 stores none).
 * A multiplier that is not positive and finite is PD_ERR_NONFINITE naming its block; the model
 * keeps its old multipliers then. */
pd_status pd_model_set_branch(pd_model *m, const double *mu, pd_error *e);
/* Block b's residual-branch multiplier; 1.0 means the forward and reverse skip the multiply. */
static inline double pd_model_branch(const pd_model *m, size_t b) { return m->branch ? m->branch[b] : 1.0; }

/* Block b's parameters, indexed by slot (PD_P_*). */
static inline pd_param *const *pd_model_block(const pd_model *m, size_t b) {
    return m->params + pd_block_param(b, 0);
}
/* The trailing parameter in slot k (PD_TAIL_*). */
static inline pd_param *pd_model_trailing(const pd_model *m, int k) {
    return m->params[pd_trailing_param(m->cfg.layers, k)];
}

#endif
