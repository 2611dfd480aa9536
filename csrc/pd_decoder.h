/* SPDX-License-Identifier: MIT */
/* Decoder configuration, parameter layout, and the recorded forward ("graph"). */
#ifndef PD_DECODER_H
#define PD_DECODER_H
#include <stddef.h>
#include <stdint.h>
#include "pd_error.h"
#include "pd_nodes.h"
#include "pd_rng.h"
#include "ops/rmsnorm.h" /* pd_norm_rec */

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
} pd_param;

/* Per-block parameter slots, in declaration order (index 1 + 9*b + k). */
enum {
    PD_P_ATTN_GAIN = 0, PD_P_WQ, PD_P_WK, PD_P_WV, PD_P_WO,
    PD_P_FFN_GAIN, PD_P_WG, PD_P_WU, PD_P_WD, PD_P_PER_BLOCK
};

typedef struct {
    pd_config cfg;
    size_t head_width, kv_width, n_params;
    pd_param **params;           /* borrowed, 9L+2 in declaration order */
    uint8_t *shared;             /* [n_params]: another slot names the same parameter */
    double *rope_sin, *rope_cos; /* [max_positions, head_width/2] */
} pd_model;

/* The values one block records (docs/numerics.md §5.3-§5.6), named like its pd_node_kind. */
typedef struct {
    pd_norm_rec attn_norm, ffn_norm;
    double *query_heads, *rot_query_heads;   /* [B, H, T, D] */
    double *key_heads, *rot_key_heads;       /* [B, K, T, D] */
    double *value_heads;                     /* [B, K, T, D] */
    double *weights;                         /* [B, H, T, T] attention probabilities */
    double *head_outputs;                    /* [B, H, T, D] */
    double *merged, *attn_out, *after_attn;  /* [N, W] */
    double *gate_linear, *gate_sigmoid, *gate_silu, *up, *product; /* [N, F] */
    double *ffn_out, *out;                   /* [N, W] */
} pd_block_rec;

typedef struct {
    const pd_model *model;
    size_t B, T, N, n_valid;
    int64_t *ids;        /* [N]; ignored where invalid */
    uint8_t *valid;      /* [N] */
    size_t *pos;         /* [N] segment-local position */
    size_t *seg_start;   /* [N] first t of the position's segment in its row */
    size_t *seg_end;     /* [N] one past the last t of the segment */
    int recorded;        /* 0: blocks share one scratch record */
    int lean;            /* recorded keeping only what a training step reads (PD_RECORD_TRAINING) */
    size_t n_blocks_stored;
    double *x0;          /* [N, W] embedding output */
    double **sites;      /* [2L+1] residual sites (views into records or own copies) */
    double *site_arena;  /* the copies of an unrecorded forward */
    pd_block_rec *blocks;
    double *q, *k, *v;   /* projection scratch [N, W], [N, KD], [N, KD] before the head split */
    pd_norm_rec final_norm;
    double *logits;      /* [N, V] */
    double *prob;        /* [N, V] once a loss is attached */
    int prob_spent;      /* prob holds a reverse pass's logits adjoint; the next pass recomputes it */
    double *nll;         /* [N] per-target NLL once a loss is attached */
    int64_t *targets;
    int has_loss;
    size_t n_targets;
    double loss;
    uint64_t *revisions; /* parameter revisions seen by this forward */
    size_t *checksums;   /* recorded graphs: parameter value checksums seen by this forward */
    double *arena;
    struct pd_grad_txn *pending; /* a waiting pass's contributions (pd_grad_txn.h) */
} pd_graph;

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

/* What a forward keeps (docs/numerics.md §5.8): the residual sites, final norm and logits only;
 * every named value; or only what a training step reads: the reverse pass and the residual-health
 * observer (the rest computed in one shared
 * scratch set, the probabilities written over the logits). */
enum { PD_RECORD_NONE = 0, PD_RECORD_ALL = 1, PD_RECORD_TRAINING = 2 };

/* Runs the forward pass. valid/pos/seg_start may be NULL for one full segment per row. */
pd_status pd_graph_forward(pd_graph *g, const pd_model *m, size_t B, size_t T, const int64_t *ids,
                           const uint8_t *valid, const size_t *pos, const size_t *seg_start,
                           int record, pd_error *e);
/* Whether a token or target id lies in [0, V): the one range rule for ids. */
static inline int pd_id_in_range(int64_t id, size_t V) { return id >= 0 && (uint64_t)id < V; }
/* The same refusal the forward (tokens) or the loss (targets != 0) gives for the first id out of
 * range among n ids (read only where valid[p], when valid is given), without running a model. */
pd_status pd_check_ids(const int64_t *ids, const uint8_t *valid, size_t n, size_t V, int targets,
                       pd_error *e);
/* Attaches the valid-target mean NLL; targets [N], read only at valid positions. */
pd_status pd_graph_loss(pd_graph *g, const int64_t *targets, pd_error *e);
/* The tied head into g->logits (docs/numerics.md §5.6); again, by a lean record's reverse pass,
 * once the parameters are known unchanged. */
void pd_graph_head(pd_graph *g);
void pd_graph_free(pd_graph *g);

/* Pointer and shape of a named value; NULL when not stored (or, in a lean record, not kept). */
double *pd_graph_value(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]);
/* The shape of a named value the graph computed, kept or not (its adjoint's shape); 0 when the
 * graph has no such value. */
int pd_graph_value_shape(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]);

#endif
