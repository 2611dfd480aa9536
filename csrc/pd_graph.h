/* SPDX-License-Identifier: MIT */
/* The recorded forward ("graph"): its block records, its one arena carved by the node table's
 * shapes, and the lookup of a named value (pd_graph.c). The forward that fills it is
 * pd_forward.h. */
#ifndef PD_GRAPH_H
#define PD_GRAPH_H
#include <stddef.h>
#include <stdint.h>
#include "pd_error.h"
#include "pd_model.h"
#include "pd_nodes.h"
#include "ops/rmsnorm.h" /* pd_norm_rec */

/* The values a block record holds besides its named ones (the norms' statistics the trace does
 * not name, the SiLU's sigmoid), X(identifier, made with, shape): a lean record keeps one
 * exactly when it keeps the named value made with it, so the node table's lean column stays the
 * one list of what a training record keeps. */
#define PD_BLOCK_UNNAMED(X)                             \
    X(ATTN_SHIFTED, ATTN_MEAN_SQUARE, STAT)             \
    X(FFN_MEAN_SQUARE, FFN_NORM_OUTPUT, STAT)           \
    X(FFN_SHIFTED, FFN_NORM_OUTPUT, STAT)               \
    X(FFN_INVERSE_RMS, FFN_NORM_OUTPUT, STAT)           \
    X(FFN_NORMALIZED, FFN_NORM_OUTPUT, ROWS_W)          \
    X(GATE_SIGMOID, GATE_SILU, ROWS_F)

/* A block value's index in its record: a block node kind (pd_node_kind) or, after them, a
 * PD_V_* of the table above. */
#define PD_UNNAMED_ENUM_(id, with, shape) PD_V_##id,
enum { PD_V_BEFORE_UNNAMED_ = PD_N_BLOCK_KINDS - 1, PD_BLOCK_UNNAMED(PD_UNNAMED_ENUM_) PD_BLOCK_VALUES };
#undef PD_UNNAMED_ENUM_

/* The values one block records (docs/numerics.md §5.3-§5.6), indexed by block value. */
typedef struct {
    double *v[PD_BLOCK_VALUES];
} pd_block_rec;

/* The saved values of a block's attention norm and FFN norm, as the norm op reads them. */
static inline pd_norm_rec pd_block_attn_norm(const pd_block_rec *r) {
    const pd_norm_rec n = {r->v[PD_N_ATTN_MEAN_SQUARE], r->v[PD_V_ATTN_SHIFTED], r->v[PD_N_ATTN_INVERSE_RMS],
                           r->v[PD_N_ATTN_NORMALIZED], r->v[PD_N_ATTN_NORM_OUTPUT]};
    return n;
}
static inline pd_norm_rec pd_block_ffn_norm(const pd_block_rec *r) {
    const pd_norm_rec n = {r->v[PD_V_FFN_MEAN_SQUARE], r->v[PD_V_FFN_SHIFTED], r->v[PD_V_FFN_INVERSE_RMS],
                           r->v[PD_V_FFN_NORMALIZED], r->v[PD_N_FFN_NORM_OUTPUT]};
    return n;
}

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
    int unguarded;       /* a one-call training step's record: no value checksums (pd_forward.h) */
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
    struct pd_csum_s *csum; /* during a recorded forward: per parameter, the terms its packing adds */
    double *arena;
    struct pd_grad_txn *pending; /* a waiting pass's contributions (pd_grad_txn.h) */
    /* an unguarded record's reverse-pass lookup tables and adjoint arena, kept for its next
     * pass over the same shape (pd_backward.c); NULL before its first pass */
    int64_t *kept_gather;
    double *kept_arena;
} pd_graph;

/* What a forward keeps (docs/numerics.md §5.8): the residual sites, final norm and logits only;
 * every named value; or only what a training step reads: the reverse pass and the residual-health
 * observer (the rest computed in one shared scratch set, the probabilities written over the
 * logits). */
enum { PD_RECORD_NONE = 0, PD_RECORD_ALL = 1, PD_RECORD_TRAINING = 2 };

/* Sets g up for a forward of m over a B x T batch (B * T checked by the caller) recording per
 * `record` (a PD_RECORD_*): the layout arrays, the block records and the arena, every buffer
 * bound; on failure g is freed. */
pd_status pd_graph_alloc(pd_graph *g, const pd_model *m, size_t B, size_t T, int record, pd_error *e);
/* The doubles of the arena pd_graph_alloc would take for m over B x T in this record mode
 * (SIZE_MAX when that overflows), nothing allocated. */
size_t pd_graph_arena_doubles(const pd_model *m, size_t B, size_t T, int record);
void pd_graph_free(pd_graph *g);

/* The extents (pd_shapes.h) of g's values. */
void pd_graph_extents(const pd_graph *g, size_t x[PD_X_COUNT]);

/* Pointer and shape of a named value; NULL when not stored (or, in a lean record, not kept). */
double *pd_graph_value(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]);
/* The shape of a named value the graph computed, kept or not (its adjoint's shape); 0 when the
 * graph has no such value. */
int pd_graph_value_shape(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]);

#endif
