/* SPDX-License-Identifier: MIT */
/* The graph's one pooled arena, carved by the shape tables (a measuring pass over a NULL base
 * gives its size, the same pass over the arena cuts it), and the lookup of a named value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pd_graph.h"
#include "pd_buffer.h"
#include "pd_grad_txn.h"
#include "pd_shapes.h"

typedef struct {
    int shape, with; /* shape class; the named value whose lean column this value follows */
} unnamed_row;

#define UNNAMED_ROW_(id, with, shape) {PD_S_##shape, PD_N_##with},
static const unnamed_row unnamed[] = {PD_BLOCK_UNNAMED(UNNAMED_ROW_)};
#undef UNNAMED_ROW_
_Static_assert(sizeof unnamed / sizeof unnamed[0] == PD_BLOCK_VALUES - PD_N_BLOCK_KINDS,
               "one row per unnamed block value");

/* The shape class of block value v, and the node kind whose lean column decides whether a lean
 * record keeps it per block. */
static int value_shape(int v) {
    return v < PD_N_BLOCK_KINDS ? pd_node_shape(v) : unnamed[v - PD_N_BLOCK_KINDS].shape;
}
static int value_kind(int v) { return v < PD_N_BLOCK_KINDS ? v : unnamed[v - PD_N_BLOCK_KINDS].with; }

void pd_graph_extents(const pd_graph *g, size_t x[PD_X_COUNT]) {
    pd_config_extents(&g->model->cfg, g->B, g->T, x);
}

static void norm_bind(pd_norm_rec *r, pd_carver *c, const size_t x[PD_X_COUNT]) {
    r->mean_square = pd_carve(c, 1, PD_S_STAT, x);
    r->shifted = pd_carve(c, 1, PD_S_STAT, x);
    r->inverse_rms = pd_carve(c, 1, PD_S_STAT, x);
    r->normalized = pd_carve(c, 1, PD_S_ROWS_W, x);
    r->out = pd_carve(c, 1, PD_S_ROWS_W, x);
}

/* The values computed once per graph: embedding, final norm, logits, the q/k/v projections. */
static void global_bind(pd_graph *g, pd_carver *c, const size_t x[PD_X_COUNT]) {
    g->x0 = pd_carve(c, 1, PD_S_ROWS_W, x);
    norm_bind(&g->final_norm, c, x);
    g->logits = pd_carve(c, 1, PD_S_ROWS_V, x);
    g->q = pd_carve(c, 1, PD_S_ROWS_W, x);
    g->k = pd_carve(c, 1, PD_S_ROWS_KD, x);
    g->v = pd_carve(c, 1, PD_S_ROWS_KD, x);
}

/* The stored block records, each value by its row. A lean record keeps what its node kind's
 * lean column says per block; the others all blocks share, carved once, first. */
static void blocks_bind(pd_graph *g, pd_carver *c, const size_t x[PD_X_COUNT]) {
    double *shared[PD_BLOCK_VALUES] = {0};
    int per_block[PD_BLOCK_VALUES];
    for (int v = 0; v < PD_BLOCK_VALUES; v++) {
        per_block[v] = !g->lean || pd_node_kept_lean(value_kind(v));
        if (!per_block[v]) shared[v] = pd_carve(c, 1, value_shape(v), x);
    }
    pd_block_rec measured; /* a measuring pass's records: only their sizes count */
    for (size_t i = 0; i < g->n_blocks_stored; i++) {
        pd_block_rec *r = c->base ? &g->blocks[i] : &measured;
        for (int v = 0; v < PD_BLOCK_VALUES; v++)
            r->v[v] = per_block[v] ? pd_carve(c, 1, value_shape(v), x) : shared[v];
    }
}

/* Cuts the arena at c->base (or measures it): global values, the shared set, the block
 * records, the copies of the residual sites of an unrecorded forward. */
static void graph_bind(pd_graph *g, pd_carver *c) {
    size_t x[PD_X_COUNT];
    pd_graph_extents(g, x);
    global_bind(g, c, x);
    blocks_bind(g, c, x);
    g->site_arena = g->recorded ? NULL : pd_carve(c, 2 * g->model->cfg.layers + 1, PD_S_ROWS_W, x);
}

/* The next `bytes` of the layout block at base (NULL over a NULL base), rounded up to 8 so
 * every piece stays aligned. */
static void *layout_cut(char *base, size_t *used, size_t bytes) {
    void *p = base ? base + *used : NULL;
    *used += (bytes + 7) & ~(size_t)7;
    return p;
}

/* The layout arrays, cut from one block at base (one allocation a forward instead of nine);
 * over a NULL base they are NULL and only *used counts the block's size. */
static void layout_bind(pd_graph *g, char *base, size_t *used) {
    const size_t N = g->N, np = g->model->n_params + 1;
    g->ids = layout_cut(base, used, N * sizeof(int64_t));
    g->targets = layout_cut(base, used, N * sizeof(int64_t));
    g->pos = layout_cut(base, used, N * sizeof(size_t));
    g->seg_start = layout_cut(base, used, N * sizeof(size_t));
    g->seg_end = layout_cut(base, used, N * sizeof(size_t));
    g->revisions = layout_cut(base, used, np * sizeof(uint64_t));
    g->checksums = layout_cut(base, used, np * sizeof(size_t));
    g->sites = layout_cut(base, used, (2 * g->model->cfg.layers + 1) * sizeof(double *));
    g->valid = layout_cut(base, used, N);
}

/* The layout block, the block records and the arena of `doubles`; on failure the caller frees g.
 * The layout's size is below the arena's (ten doubles a position at least): no overflow. */
static pd_status graph_alloc(pd_graph *g, size_t doubles, pd_error *e) {
    size_t bytes = 0, used = 0;
    layout_bind(g, NULL, &bytes);
    char *block = malloc(bytes);
    layout_bind(g, block, &used); /* a failed malloc leaves every layout array NULL */
    g->blocks = calloc(g->n_blocks_stored + 1, sizeof(pd_block_rec));
    g->arena = pd_buf_get(doubles, 0, e);
    if (!block || !g->blocks || !g->arena) return pd_fail(e, PD_ERR_ALLOC, doubles, 0.0, -1, -1);
    return PD_OK;
}

/* g's shape and record mode, and its arena measured (over a NULL base) into *measure. */
static void graph_measure(pd_graph *g, const pd_model *m, size_t B, size_t T, int record, pd_carver *measure) {
    memset(g, 0, sizeof *g);
    g->model = m;
    g->B = B;
    g->T = T;
    g->N = B * T;
    g->recorded = record != PD_RECORD_NONE;
    g->lean = record == PD_RECORD_TRAINING;
    g->n_blocks_stored = g->recorded ? m->cfg.layers : (m->cfg.layers ? 1 : 0);
    *measure = (pd_carver){NULL, 0, 0};
    graph_bind(g, measure);
}

size_t pd_graph_arena_doubles(const pd_model *m, size_t B, size_t T, int record) {
    pd_graph g;
    pd_carver measure;
    graph_measure(&g, m, B, T, record, &measure);
    return measure.overflow ? SIZE_MAX : measure.used;
}

pd_status pd_graph_alloc(pd_graph *g, const pd_model *m, size_t B, size_t T, int record, pd_error *e) {
    pd_carver measure;
    graph_measure(g, m, B, T, record, &measure);
    /* the layout arrays' sizes are below the arena's (ten doubles a position at least) */
    if (measure.overflow) return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    pd_status st = graph_alloc(g, measure.used, e);
    if (st != PD_OK) {
        pd_graph_free(g);
        return st;
    }
    pd_carver cut = {g->arena, 0, 0};
    graph_bind(g, &cut);
    return PD_OK;
}

void pd_graph_free(pd_graph *g) {
    pd_graph_discard(g);
    free(g->blocks);
    free(g->ids); /* the layout block, every layout array and the sites in it */
    if (g->prob != g->logits) pd_buf_put(g->prob); /* a lean record's lives in the arena */
    pd_buf_put(g->arena); free(g->nll);
    free(g->kept_gather); pd_buf_put(g->kept_arena);
    memset(g, 0, sizeof *g);
}

/* Where a value computed once per graph lives; NULL when the graph has none. */
static double *global_value(const pd_graph *g, int kind) {
    switch (kind) {
    case PD_N_EMBEDDING: return g->sites[0];
    case PD_N_FINAL_NORM_OUTPUT: return g->final_norm.out;
    case PD_N_LOGITS: return g->logits;
    case PD_N_LOSS: return g->has_loss ? (double *)&g->loss : NULL;
    case PD_N_PER_TARGET_NLL: return g->has_loss ? g->nll : NULL;
    default: return NULL;
    }
}

/* Where a block's value lives: its residual sites (2b+1 after the attention, 2b+2 its output)
 * outlive a shared record, the rest are in the block's record when it has one. */
static double *block_value_at(const pd_graph *g, size_t block, int kind) {
    if (block >= g->model->cfg.layers || kind < 0 || kind >= PD_N_BLOCK_KINDS) return NULL;
    if (kind == PD_N_AFTER_ATTENTION) return g->sites[2 * block + 1];
    if (kind == PD_N_BLOCK_OUTPUT) return g->sites[2 * block + 2];
    return g->recorded ? g->blocks[block].v[kind] : NULL;
}

/* Where (block, kind) lives in the arena and its shape (the node table's), kept or not; NULL
 * when the graph has no such value. */
static double *value_at(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]) {
    if (!g->arena) return NULL;
    double *at = block < 0 ? global_value(g, kind) : block_value_at(g, (size_t)block, kind);
    if (at) {
        size_t x[PD_X_COUNT];
        pd_graph_extents(g, x);
        *rank = pd_shape_dims(pd_node_shape(kind), x, dims);
    }
    return at;
}

double *pd_graph_value(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]) {
    double *at = value_at(g, block, kind, rank, dims);
    return g->lean && !pd_node_kept_lean(kind) ? NULL : at;
}

int pd_graph_value_shape(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]) {
    return value_at(g, block, kind, rank, dims) != NULL;
}
