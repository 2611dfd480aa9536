/* SPDX-License-Identifier: MIT */
/* Configuration checks, parameter layout and draws, and the recorded forward pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pd_decoder.h"
#include "pd_grad_txn.h"
#include "pd_checksum.h"
#include "pd_interrupt.h"
#include "pd_init.h"
#include "kernels/gemm.h"
#include "pd_buffer.h"
#include "pd_tensor.h"
#include "ops/attention.h"
#include "ops/embedding.h"
#include "ops/heads.h"
#include "ops/loss.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

#define CONFIG_RULE_(index, rule) [index] = rule,
static const char *const config_rules[] = {PD_CONFIG_CHECKS(CONFIG_RULE_)};
#undef CONFIG_RULE_

const char *pd_config_check_rule(size_t index) {
    return index < sizeof config_rules / sizeof config_rules[0] ? config_rules[index] : NULL;
}

pd_status pd_config_validate(const pd_config *c, pd_error *e) {
    /* Checks in the reference's order; index names the failed check. */
    if (c->vocabulary_size == 0) return pd_fail(e, PD_ERR_CONFIG, 1, 0.0, -1, -1);
    if (c->model_width == 0) return pd_fail(e, PD_ERR_CONFIG, 2, 0.0, -1, -1);
    if (c->heads == 0) return pd_fail(e, PD_ERR_CONFIG, 3, 0.0, -1, -1);
    if (c->model_width % c->heads) return pd_fail(e, PD_ERR_CONFIG, 4, 0.0, -1, -1);
    if ((c->model_width / c->heads) % 2) return pd_fail(e, PD_ERR_CONFIG, 5, 0.0, -1, -1);
    if (c->kv_heads == 0 || c->heads % c->kv_heads) return pd_fail(e, PD_ERR_CONFIG, 10, 0.0, -1, -1);
    if (c->feed_forward_width == 0) return pd_fail(e, PD_ERR_CONFIG, 6, 0.0, -1, -1);
    if (c->max_positions == 0) return pd_fail(e, PD_ERR_CONFIG, 7, 0.0, -1, -1);
    if (!isfinite(c->rope_base) || c->rope_base <= 0.0) return pd_fail(e, PD_ERR_CONFIG, 8, c->rope_base, -1, -1);
    if (!isfinite(c->rms_epsilon) || c->rms_epsilon < 0.0) return pd_fail(e, PD_ERR_CONFIG, 9, c->rms_epsilon, -1, -1);
    return PD_OK;
}

size_t pd_param_tensor_count(const pd_config *c) { return 9 * c->layers + 2; }

pd_status pd_param_shape(const pd_config *c, size_t i, size_t *rank, size_t dims[2]) {
    const size_t W = c->model_width, F = c->feed_forward_width;
    const size_t KVD = c->kv_heads * (W / c->heads);
    const size_t n = pd_param_tensor_count(c);
    if (i >= n) return PD_ERR_SHAPE;
    if (i == 0) { *rank = 2; dims[0] = c->vocabulary_size; dims[1] = W; return PD_OK; }
    if (i == n - 1) { *rank = 1; dims[0] = W; dims[1] = 1; return PD_OK; }
    switch ((i - 1) % 9) {
    case PD_P_ATTN_GAIN: case PD_P_FFN_GAIN: *rank = 1; dims[0] = W; dims[1] = 1; break;
    case PD_P_WQ: case PD_P_WO: *rank = 2; dims[0] = W; dims[1] = W; break;
    case PD_P_WK: case PD_P_WV: *rank = 2; dims[0] = W; dims[1] = KVD; break;
    case PD_P_WG: case PD_P_WU: *rank = 2; dims[0] = W; dims[1] = F; break;
    default: *rank = 2; dims[0] = F; dims[1] = W; break;
    }
    return PD_OK;
}

size_t pd_param_name(const pd_config *c, size_t i, char *buf, size_t cap) {
    static const char *const suffix[9] = {
        "attention_norm.gain", "attention.query.weight", "attention.key.weight",
        "attention.value.weight", "attention.output.weight", "ffn_norm.gain",
        "ffn.gate.weight", "ffn.up.weight", "ffn.down.weight"};
    const size_t n = pd_param_tensor_count(c);
    int len;
    if (i == 0) len = snprintf(buf, cap, "token_embedding.weight");
    else if (i == n - 1) len = snprintf(buf, cap, "final_norm.gain");
    else len = snprintf(buf, cap, "blocks.%zu.%s", (i - 1) / 9, suffix[(i - 1) % 9]);
    return len < 0 ? 0 : (size_t)len;
}

pd_status pd_config_parameter_count(const pd_config *c, size_t *count, pd_error *e) {
    size_t total = 0, sz, rank, dims[2];
    const size_t n = pd_param_tensor_count(c);
    if (c->layers > (SIZE_MAX - 2) / 9) return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    /* one block's count times the layer count, so huge depths stay O(1) */
    size_t per_block = 0;
    for (size_t i = 0; i < (n > 2 ? 9 : 0); i++) {
        pd_param_shape(c, 1 + i, &rank, dims);
        if (!pd_mul_ok(dims[0], rank == 2 ? dims[1] : 1, &sz) || !pd_add_ok(per_block, sz, &per_block))
            return pd_fail(e, PD_ERR_OVERFLOW, 1 + i, 0.0, -1, -1);
    }
    if (!pd_mul_ok(per_block, c->layers, &total)) return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    if (!pd_mul_ok(c->vocabulary_size, c->model_width, &sz) || !pd_add_ok(total, sz, &total) ||
        !pd_add_ok(total, c->model_width, &total))
        return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    *count = total;
    return PD_OK;
}

pd_status pd_draw_parameters(const pd_config *c, double **values, pd_rng *rng, pd_error *e) {
    pd_rng trial = *rng;
    const size_t n = pd_param_tensor_count(c);
    for (size_t i = 0; i < n; i++) {
        size_t rank, dims[2];
        pd_param_shape(c, i, &rank, dims);
        if (rank == 1) { /* gains start at 1.0 and consume no draws */
            for (size_t w = 0; w < dims[0]; w++) values[i][w] = 1.0;
            continue;
        }
        pd_xavier_scale s;
        pd_status st = pd_xavier_scale_of(dims[0], dims[1], &s, e);
        if (st == PD_OK) st = pd_xavier_fill(&s, &trial, values[i], e);
        if (st != PD_OK) {
            if (e) e->index = i;
            return st;
        }
    }
    *rng = trial;
    return PD_OK;
}

pd_status pd_params_check(const pd_config *c, pd_param *const *params, size_t n, pd_error *e) {
    const size_t want = pd_param_tensor_count(c);
    if (n != want) return pd_fail(e, PD_ERR_SHAPE, n, (double)want, -1, -1);
    for (size_t i = 0; i < n; i++) {
        size_t rank, dims[2];
        pd_param_shape(c, i, &rank, dims);
        if (!params[i] || params[i]->size != dims[0] * (rank == 2 ? dims[1] : 1))
            return pd_fail(e, PD_ERR_SHAPE, i, 0.0, -1, -1);
    }
    return PD_OK;
}

static int by_address(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)*(pd_param *const *)a, y = (uintptr_t)*(pd_param *const *)b;
    return (x > y) - (x < y);
}

/* shared[i] = 1 when another slot of the table names params[i] too (by a sorted copy). */
static pd_status mark_shared(pd_model *m, pd_error *e) {
    const size_t n = m->n_params;
    pd_param **sorted = malloc((n ? n : 1) * sizeof *sorted);
    m->shared = calloc(n ? n : 1, 1);
    if (!sorted || !m->shared) {
        free(sorted);
        return pd_fail(e, PD_ERR_ALLOC, n, 0.0, -1, -1);
    }
    if (n) memcpy(sorted, m->params, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_address);
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = n; /* the first sorted entry not below params[i] */
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if ((uintptr_t)sorted[mid] < (uintptr_t)m->params[i]) lo = mid + 1;
            else hi = mid;
        }
        m->shared[i] = (uint8_t)(lo + 1 < n && sorted[lo + 1] == m->params[i]);
    }
    free(sorted);
    return PD_OK;
}

pd_status pd_model_init(pd_model *m, const pd_config *c, pd_param **params, pd_error *e) {
    memset(m, 0, sizeof *m);
    pd_status st = pd_config_validate(c, e);
    if (st != PD_OK) return st;
    m->cfg = *c;
    m->head_width = c->model_width / c->heads;
    m->kv_width = c->kv_heads * m->head_width;
    m->n_params = pd_param_tensor_count(c);
    m->params = params;
    if ((st = mark_shared(m, e)) != PD_OK) {
        pd_model_free(m);
        return st;
    }
    size_t half = m->head_width / 2, tab;
    if (!pd_mul_ok(c->max_positions, half, &tab)) {
        pd_model_free(m);
        return pd_fail(e, PD_ERR_ROPE, 0, 0.0, -1, -1);
    }
    m->rope_sin = pd_zeros(tab, e);
    m->rope_cos = pd_zeros(tab, e);
    if (!m->rope_sin || !m->rope_cos) {
        pd_model_free(m);
        return pd_fail(e, PD_ERR_ALLOC, 2 * tab, 0.0, -1, -1);
    }
    st = pd_rope_tables(c->max_positions, m->head_width, c->rope_base, m->rope_sin, m->rope_cos, e);
    if (st != PD_OK) pd_model_free(m);
    return st;
}

void pd_model_free(pd_model *m) {
    free(m->rope_sin);
    free(m->rope_cos);
    free(m->shared);
    m->rope_sin = m->rope_cos = NULL;
    m->shared = NULL;
}

/* ---- forward ---------------------------------------------------------------------- */

/* Doubles of the values one block keeps for a training step, its attention weights aside: the
 * norm statistics and the [N, W], [N, KD] and [N, F] values its VJPs and the health observer read. */
static size_t block_kept_rows(const pd_model *m, size_t N) {
    const size_t W = m->cfg.model_width, F = m->cfg.feed_forward_width;
    return N * (6 + 10 * W + 2 * m->kv_width + 2 * F);
}

/* Doubles of the values a training step does not read (pre-RoPE heads, head outputs, SiLU parts
 * and the gated product): a lean record computes them in one set all blocks share. */
static size_t block_spare_size(const pd_model *m, size_t N) {
    const size_t W = m->cfg.model_width, F = m->cfg.feed_forward_width;
    return N * (2 * W + m->kv_width + 3 * F);
}

static double *carve(double **p, size_t n) {
    double *out = *p;
    *p += n;
    return out;
}

static void norm_bind(pd_norm_rec *r, double **p, size_t N, size_t W) {
    r->mean_square = carve(p, N);
    r->shifted = carve(p, N);
    r->inverse_rms = carve(p, N);
    r->normalized = carve(p, N * W);
    r->out = carve(p, N * W);
}

/* Carves one block record: the values a training step reads from *kept, the others from
 * *spare (the same cursor when every value is kept). */
static void block_bind(pd_block_rec *r, double **kept, double **spare, const pd_model *m, size_t B,
                       size_t T) {
    const size_t N = B * T, W = m->cfg.model_width, F = m->cfg.feed_forward_width;
    const size_t NW = N * W, NKV = N * m->kv_width, NF = N * F;
    norm_bind(&r->attn_norm, kept, N, W);
    norm_bind(&r->ffn_norm, kept, N, W);
    r->rot_query_heads = carve(kept, NW);
    r->merged = carve(kept, NW);
    r->after_attn = carve(kept, NW);
    r->out = carve(kept, NW);
    r->attn_out = carve(kept, NW);
    r->ffn_out = carve(kept, NW);
    r->value_heads = carve(kept, NKV);
    r->rot_key_heads = carve(kept, NKV);
    r->gate_linear = carve(kept, NF);
    r->up = carve(kept, NF);
    r->weights = carve(kept, B * m->cfg.heads * T * T);
    r->query_heads = carve(spare, NW);
    r->head_outputs = carve(spare, NW);
    r->key_heads = carve(spare, NKV);
    r->gate_sigmoid = carve(spare, NF);
    r->gate_silu = carve(spare, NF);
    r->product = carve(spare, NF);
}

static pd_status norm_forward(const pd_graph *g, const double *x, const double *gain, const pd_norm_rec *r,
                              int blk, int node, pd_error *e) {
    const pd_config *c = &g->model->cfg;
    const pd_norm_geom geom = {g->N, c->model_width, c->rms_epsilon, g->valid};
    return pd_rmsnorm_forward(&geom, x, gain, r, blk, node, e);
}

/* One decoder block (docs/numerics.md §5.6), every recorded value checked as it is made. */
static pd_status block_forward(const pd_graph *g, size_t b, const double *x, pd_block_rec *r,
                               pd_error *e) {
    const pd_model *m = g->model;
    const pd_config *c = &m->cfg;
    const size_t B = g->B, T = g->T, N = g->N, W = c->model_width, F = c->feed_forward_width;
    const size_t KVD = m->kv_width, D = m->head_width;
    pd_param *const *P = m->params + 1 + 9 * b;
    const int blk = (int)b;
    PD_TRY(norm_forward(g, x, P[PD_P_ATTN_GAIN]->value, &r->attn_norm, blk, PD_N_ATTN_NORM_OUTPUT, e));
    const double *an = r->attn_norm.out;
    pd_mm_nn(N, W, W, an, W, P[PD_P_WQ]->value, W, g->q, W, 0);
    pd_mm_nn(N, W, KVD, an, W, P[PD_P_WK]->value, KVD, g->k, KVD, 0);
    pd_mm_nn(N, W, KVD, an, W, P[PD_P_WV]->value, KVD, g->v, KVD, 0);
    PD_TRY(pd_check_finite(g->q, N * W, blk, PD_N_QUERY_HEADS, e));
    PD_TRY(pd_check_finite(g->k, N * KVD, blk, PD_N_KEY_HEADS, e));
    PD_TRY(pd_check_finite(g->v, N * KVD, blk, PD_N_VALUE_HEADS, e));
    pd_split_heads(B, T, c->heads, D, g->q, r->query_heads);
    pd_split_heads(B, T, c->kv_heads, D, g->k, r->key_heads);
    pd_split_heads(B, T, c->kv_heads, D, g->v, r->value_heads);
    const pd_rope rope = {B, T, D, g->pos, m->rope_sin, m->rope_cos};
    pd_rope_apply(&rope, c->heads, r->query_heads, r->rot_query_heads, 0);
    pd_rope_apply(&rope, c->kv_heads, r->key_heads, r->rot_key_heads, 0);
    pd_attn_geom geom = {B, T, c->heads, c->kv_heads, D, g->valid, g->seg_start, g->seg_end};
    const pd_attn_in attn = {r->rot_query_heads, r->rot_key_heads, r->value_heads};
    PD_TRY(pd_attention_forward(&geom, &attn, r->weights, r->head_outputs, blk, e));
    PD_TRY(pd_check_finite(r->head_outputs, N * W, blk, PD_N_HEAD_OUTPUTS, e));
    pd_merge_heads(B, T, c->heads, D, r->head_outputs, r->merged);
    pd_mm_nn(N, W, W, r->merged, W, P[PD_P_WO]->value, W, r->attn_out, W, 0);
    PD_TRY(pd_check_finite(r->attn_out, N * W, blk, PD_N_ATTN_OUTPUT, e));
    pd_add_vec(N * W, x, r->attn_out, r->after_attn);
    PD_TRY(pd_check_finite(r->after_attn, N * W, blk, PD_N_AFTER_ATTENTION, e));
    PD_TRY(norm_forward(g, r->after_attn, P[PD_P_FFN_GAIN]->value, &r->ffn_norm, blk, PD_N_FFN_NORM_OUTPUT, e));
    const double *fn = r->ffn_norm.out;
    pd_mm_nn(N, W, F, fn, W, P[PD_P_WG]->value, F, r->gate_linear, F, 0);
    PD_TRY(pd_check_finite(r->gate_linear, N * F, blk, PD_N_GATE_LINEAR, e));
    pd_silu_forward(N * F, r->gate_linear, r->gate_sigmoid, r->gate_silu);
    PD_TRY(pd_check_finite(r->gate_silu, N * F, blk, PD_N_GATE_SILU, e));
    pd_mm_nn(N, W, F, fn, W, P[PD_P_WU]->value, F, r->up, F, 0);
    PD_TRY(pd_check_finite(r->up, N * F, blk, PD_N_UP, e));
    pd_mul_vec(N * F, r->gate_silu, r->up, r->product);
    PD_TRY(pd_check_finite(r->product, N * F, blk, PD_N_PRODUCT, e));
    pd_mm_nn(N, F, W, r->product, F, P[PD_P_WD]->value, W, r->ffn_out, W, 0);
    PD_TRY(pd_check_finite(r->ffn_out, N * W, blk, PD_N_FFN_OUTPUT, e));
    pd_add_vec(N * W, r->after_attn, r->ffn_out, r->out);
    PD_TRY(pd_check_finite(r->out, N * W, blk, PD_N_BLOCK_OUTPUT, e));
    return PD_OK;
}

static pd_status fill_layout(pd_graph *g, const int64_t *ids, const uint8_t *valid,
                             const size_t *pos, const size_t *seg_start, pd_error *e) {
    const pd_config *c = &g->model->cfg;
    const size_t B = g->B, T = g->T, N = g->N;
    g->n_valid = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            const size_t p = b * T + t;
            g->valid[p] = valid ? (valid[p] != 0) : 1;
            if (!g->valid[p]) {
                g->ids[p] = 0;
                g->pos[p] = 0;
                g->seg_start[p] = t;
                continue;
            }
            g->n_valid++;
            if (!pd_id_in_range(ids[p], c->vocabulary_size))
                return pd_fail(e, PD_ERR_TOKEN, p, (double)ids[p], -1, PD_N_EMBEDDING);
            g->ids[p] = ids[p];
            size_t s0 = seg_start ? seg_start[p] : 0;
            size_t ps = pos ? pos[p] : t;
            /* a segment is a contiguous run of valid positions numbered 0, 1, ... */
            if (s0 > t || ps != t - s0 || (t > s0 && !g->valid[p - 1]) ||
                (t > s0 && g->seg_start[p - 1] != s0))
                return pd_fail(e, PD_ERR_LAYOUT, p, (double)ps, -1, -1);
            if (ps >= c->max_positions) return pd_fail(e, PD_ERR_LAYOUT, p, (double)ps, -1, -1);
            g->pos[p] = ps;
            g->seg_start[p] = s0;
        }
    if (g->n_valid == 0) return pd_fail(e, PD_ERR_EMPTY, 0, 0.0, -1, -1);
    for (size_t b = 0; b < B; b++) {
        size_t end = T;
        for (size_t t = T; t-- > 0;) {
            const size_t p = b * T + t;
            if (!g->valid[p]) { g->seg_end[p] = t + 1; end = t; continue; }
            g->seg_end[p] = end;
            if (t == g->seg_start[p]) end = t;
        }
    }
    (void)N;
    return PD_OK;
}

/* Doubles of the graph's one pooled arena; every element is written before it is read. */
typedef struct {
    size_t block;  /* one stored block record */
    size_t spare;  /* the shared set of values a lean record does not keep */
    size_t global; /* x0, final norm, logits, q/k/v projection scratch */
    size_t sites;  /* copies of the residual sites (unrecorded forward only) */
    size_t total;  /* global + stored block records + spare + sites */
} graph_sizes;

static pd_status graph_sizes_of(const pd_graph *g, graph_sizes *s, pd_error *e) {
    const pd_model *m = g->model;
    const size_t N = g->N, W = m->cfg.model_width, V = m->cfg.vocabulary_size, L = m->cfg.layers;
    const size_t n_sites = 2 * L + 1;
    size_t tmp, weights, kept, both;
    /* overflow guard for every size below: the per-row sizes are bounded by the first product,
     * B * heads * T by N * W */
    if (!pd_mul_ok(N, V + 16 * W + 8 * m->kv_width + 8 * m->cfg.feed_forward_width + 16, &tmp) ||
        !pd_mul_ok(g->B * m->cfg.heads * g->T, g->T, &weights) ||
        !pd_add_ok(block_kept_rows(m, N), weights, &kept) ||
        !pd_add_ok(kept, block_spare_size(m, N), &both) || !pd_mul_ok(both, L + 1, &tmp) ||
        !pd_mul_ok(n_sites, N * W, &tmp))
        return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    s->spare = g->lean ? both - kept : 0;
    s->block = g->lean ? kept : both;
    s->global = N * W + 3 * N + 2 * N * W + N * V + N * W + 2 * N * m->kv_width;
    s->sites = g->recorded ? 0 : n_sites * N * W;
    if (!pd_mul_ok(g->n_blocks_stored, s->block, &s->total) || !pd_add_ok(s->total, s->global, &s->total) ||
        !pd_add_ok(s->total, s->spare, &s->total) || !pd_add_ok(s->total, s->sites, &s->total))
        return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    return PD_OK;
}

/* The layout arrays, the block records and the arena; on failure the caller frees g. */
static pd_status graph_alloc(pd_graph *g, const graph_sizes *s, pd_error *e) {
    const size_t N = g->N, n_sites = 2 * g->model->cfg.layers + 1;
    g->ids = malloc(N * sizeof(int64_t));
    g->targets = malloc(N * sizeof(int64_t));
    g->valid = malloc(N);
    g->pos = malloc(N * sizeof(size_t));
    g->seg_start = malloc(N * sizeof(size_t));
    g->seg_end = malloc(N * sizeof(size_t));
    g->revisions = malloc((g->model->n_params + 1) * sizeof(uint64_t));
    g->checksums = malloc((g->model->n_params + 1) * sizeof(size_t));
    g->sites = malloc(n_sites * sizeof(double *));
    g->blocks = calloc(g->n_blocks_stored + 1, sizeof(pd_block_rec));
    g->arena = pd_buf_get(s->total, 0, e);
    if (!g->ids || !g->targets || !g->valid || !g->pos || !g->seg_start || !g->seg_end ||
        !g->revisions || !g->checksums || !g->sites || !g->blocks || !g->arena)
        return pd_fail(e, PD_ERR_ALLOC, s->total, 0.0, -1, -1);
    return PD_OK;
}

/* Carves the arena: global values, the block records, the lean record's spare set, the site
 * copies. */
static void graph_bind(pd_graph *g, const graph_sizes *s) {
    const pd_model *m = g->model;
    const size_t N = g->N, W = m->cfg.model_width, V = m->cfg.vocabulary_size;
    double *p = g->arena;
    g->x0 = carve(&p, N * W);
    g->final_norm.mean_square = carve(&p, N);
    g->final_norm.shifted = carve(&p, N);
    g->final_norm.inverse_rms = carve(&p, N);
    g->final_norm.normalized = carve(&p, N * W);
    g->final_norm.out = carve(&p, N * W);
    g->logits = carve(&p, N * V);
    g->q = carve(&p, N * W);
    g->k = carve(&p, N * m->kv_width);
    g->v = carve(&p, N * m->kv_width);
    double *spare_set = g->arena + s->global + g->n_blocks_stored * s->block;
    for (size_t i = 0; i < g->n_blocks_stored; i++) {
        double *kept = g->arena + s->global + i * s->block, *spare = spare_set;
        block_bind(&g->blocks[i], &kept, g->lean ? &spare : &kept, m, g->B, g->T);
    }
    g->site_arena = g->recorded ? NULL : spare_set + s->spare;
}

/* Residual site i is value itself when recorded, else a copy that outlives the shared record. */
static const double *keep_site(pd_graph *g, size_t i, double *value) {
    const size_t NW = g->N * g->model->cfg.model_width;
    if (g->recorded) return g->sites[i] = value;
    g->sites[i] = g->site_arena + i * NW;
    memcpy(g->sites[i], value, NW * sizeof(double));
    return g->sites[i];
}

/* Embedding, blocks, final norm and tied head (docs/numerics.md §5.6). */
static pd_status graph_run(pd_graph *g, pd_error *e) {
    const pd_model *m = g->model;
    const size_t N = g->N, W = m->cfg.model_width, V = m->cfg.vocabulary_size;
    const double *E = m->params[0]->value;
    pd_embedding_forward(N, W, E, g->ids, g->valid, g->x0);
    const double *x = keep_site(g, 0, g->x0);
    for (size_t b = 0; b < m->cfg.layers; b++) {
        pd_block_rec *r = &g->blocks[g->recorded ? b : 0];
        if (pd_interrupt_requested()) return pd_fail(e, PD_ERR_INTERRUPTED, b, 0.0, (int)b, -1);
        PD_TRY(block_forward(g, b, x, r, e));
        keep_site(g, 2 * b + 1, r->after_attn);
        x = keep_site(g, 2 * b + 2, r->out);
    }
    PD_TRY(norm_forward(g, x, m->params[m->n_params - 1]->value, &g->final_norm, -1, PD_N_FINAL_NORM_OUTPUT, e));
    pd_graph_head(g);
    PD_TRY(pd_check_finite(g->logits, N * V, -1, PD_N_LOGITS, e));
    return PD_OK;
}

pd_status pd_graph_forward(pd_graph *g, const pd_model *m, size_t B, size_t T, const int64_t *ids,
                           const uint8_t *valid, const size_t *pos, const size_t *seg_start,
                           int record, pd_error *e) {
    memset(g, 0, sizeof *g);
    g->model = m;
    if (B == 0 || T == 0) return pd_fail(e, PD_ERR_EMPTY, 0, 0.0, -1, -1);
    if (!pd_mul_ok(B, T, &g->N)) return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    if (T > m->cfg.max_positions && !pos) return pd_fail(e, PD_ERR_LAYOUT, T, (double)T, -1, -1);
    g->B = B;
    g->T = T;
    if (record != PD_RECORD_NONE && record != PD_RECORD_ALL && record != PD_RECORD_TRAINING)
        return pd_fail(e, PD_ERR_RECORD_MODE, 0, (double)record, -1, -1);
    g->recorded = record != PD_RECORD_NONE;
    g->lean = record == PD_RECORD_TRAINING;
    g->n_blocks_stored = g->recorded ? m->cfg.layers : (m->cfg.layers ? 1 : 0);
    graph_sizes sizes;
    pd_status st = graph_sizes_of(g, &sizes, e);
    if (st == PD_OK) st = graph_alloc(g, &sizes, e);
    if (st == PD_OK) {
        graph_bind(g, &sizes);
        st = fill_layout(g, ids, valid, pos, seg_start, e);
    }
    if (st == PD_OK) {
        for (size_t i = 0; i < m->n_params; i++) {
            g->revisions[i] = m->params[i]->revision;
            g->checksums[i] = 0;
        }
        /* only a recorded graph can run backward: inference pays nothing */
        if (g->recorded) pd_params_checksums(m->params, m->n_params, g->checksums);
        st = graph_run(g, e);
    }
    if (st != PD_OK) pd_graph_free(g);
    return st;
}

pd_status pd_check_ids(const int64_t *ids, const uint8_t *valid, size_t n, size_t V, int targets,
                       pd_error *e) {
    for (size_t p = 0; p < n; p++)
        if ((!valid || valid[p]) && !pd_id_in_range(ids[p], V))
            return targets ? pd_fail(e, PD_ERR_TARGET, p, (double)ids[p], -1, PD_N_LOSS)
                           : pd_fail(e, PD_ERR_TOKEN, p, (double)ids[p], -1, PD_N_EMBEDDING);
    return PD_OK;
}

/* The tied head, logits = final norm output times E transposed; a lean record runs it again
 * where its probabilities were, which gives the same logits while E is unchanged. */
void pd_graph_head(pd_graph *g) {
    const pd_model *m = g->model;
    const size_t N = g->N, W = m->cfg.model_width, V = m->cfg.vocabulary_size;
    pd_mm_nt(N, W, V, g->final_norm.out, W, m->params[0]->value, W, g->logits, V, 0);
}

pd_status pd_graph_loss(pd_graph *g, const int64_t *targets, pd_error *e) {
    const size_t N = g->N, V = g->model->cfg.vocabulary_size;
    for (size_t p = 0; p < N; p++) {
        if (!g->valid[p]) { g->targets[p] = 0; continue; }
        if (!pd_id_in_range(targets[p], V))
            return pd_fail(e, PD_ERR_TARGET, p, (double)targets[p], -1, PD_N_LOSS);
        g->targets[p] = targets[p];
    }
    /* a lean record writes the probabilities over the logits, their last reader */
    double *prob = g->lean ? g->logits : pd_buf_get(N * V, 0, e), *nll = pd_zeros(N, e);
    if (!prob || !nll) {
        if (!g->lean) pd_buf_put(prob);
        free(nll);
        return pd_fail(e, PD_ERR_ALLOC, N * V + N, 0.0, -1, -1);
    }
    double loss;
    size_t count;
    const pd_nll_targets t = {N, V, g->targets, g->valid};
    pd_status st = pd_nll_forward(&t, g->logits, prob, nll, &loss, &count, e);
    if (st != PD_OK) {
        if (!g->lean) pd_buf_put(prob);
        free(nll);
        return st;
    }
    if (g->prob != g->logits) pd_buf_put(g->prob);
    free(g->nll);
    g->prob = prob;
    g->prob_spent = 0;
    g->nll = nll;
    g->loss = loss;
    g->n_targets = count;
    g->has_loss = 1;
    return PD_OK;
}

void pd_graph_free(pd_graph *g) {
    pd_graph_discard(g);
    free(g->blocks); /* block records and sites live in g->arena */
    free(g->ids); free(g->targets); free(g->valid); free(g->pos); free(g->seg_start);
    free(g->seg_end); free(g->revisions); free(g->checksums); free(g->sites);
    if (g->prob != g->logits) pd_buf_put(g->prob); /* a lean record's lives in the arena */
    pd_buf_put(g->arena); free(g->nll);
    memset(g, 0, sizeof *g);
}

/* Where (block, kind) lives in the arena and its shape, kept or not; NULL when the graph has no
 * such value. */
static double *value_at(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]) {
    const pd_model *m = g->model;
    const size_t B = g->B, T = g->T, W = m->cfg.model_width, D = m->head_width;
    const size_t H = m->cfg.heads, KV = m->cfg.kv_heads, F = m->cfg.feed_forward_width;
    if (!g->arena) return NULL;
    if (block < 0) {
        *rank = 3; dims[0] = B; dims[1] = T; dims[2] = W;
        switch (kind) {
        case PD_N_EMBEDDING: return g->sites[0];
        case PD_N_FINAL_NORM_OUTPUT: return g->final_norm.out;
        case PD_N_LOGITS: dims[2] = m->cfg.vocabulary_size; return g->logits;
        case PD_N_LOSS: *rank = 0; return g->has_loss ? (double *)&g->loss : NULL;
        case PD_N_PER_TARGET_NLL: *rank = 2; return g->has_loss ? g->nll : NULL;
        default: return NULL;
        }
    }
    if ((size_t)block >= m->cfg.layers) return NULL;
    if (kind == PD_N_AFTER_ATTENTION || kind == PD_N_BLOCK_OUTPUT) {
        *rank = 3; dims[0] = B; dims[1] = T; dims[2] = W;
        return g->sites[2 * block + (kind == PD_N_AFTER_ATTENTION ? 1 : 2)];
    }
    if (!g->recorded) return NULL;
    const pd_block_rec *r = &g->blocks[block];
    *rank = 3; dims[0] = B; dims[1] = T; dims[2] = W;
    switch (kind) {
    case PD_N_ATTN_MEAN_SQUARE: dims[2] = 1; return r->attn_norm.mean_square;
    case PD_N_ATTN_INVERSE_RMS: dims[2] = 1; return r->attn_norm.inverse_rms;
    case PD_N_ATTN_NORMALIZED: return r->attn_norm.normalized;
    case PD_N_ATTN_NORM_OUTPUT: return r->attn_norm.out;
    case PD_N_MERGED: return r->merged;
    case PD_N_ATTN_OUTPUT: return r->attn_out;
    case PD_N_FFN_NORM_OUTPUT: return r->ffn_norm.out;
    case PD_N_FFN_OUTPUT: return r->ffn_out;
    case PD_N_GATE_LINEAR: dims[2] = F; return r->gate_linear;
    case PD_N_GATE_SILU: dims[2] = F; return r->gate_silu;
    case PD_N_UP: dims[2] = F; return r->up;
    case PD_N_PRODUCT: dims[2] = F; return r->product;
    default: break;
    }
    *rank = 4; dims[0] = B; dims[1] = H; dims[2] = T; dims[3] = D;
    switch (kind) {
    case PD_N_QUERY_HEADS: return r->query_heads;
    case PD_N_ROT_QUERY_HEADS: return r->rot_query_heads;
    case PD_N_HEAD_OUTPUTS: return r->head_outputs;
    case PD_N_KEY_HEADS: dims[1] = KV; return r->key_heads;
    case PD_N_VALUE_HEADS: dims[1] = KV; return r->value_heads;
    case PD_N_ROT_KEY_HEADS: dims[1] = KV; return r->rot_key_heads;
    case PD_N_WEIGHTS: dims[3] = T; return r->weights;
    default: return NULL;
    }
}

double *pd_graph_value(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]) {
    double *at = value_at(g, block, kind, rank, dims);
    return g->lean && !pd_node_kept_lean(kind) ? NULL : at;
}

int pd_graph_value_shape(const pd_graph *g, int block, int kind, size_t *rank, size_t dims[4]) {
    return value_at(g, block, kind, rank, dims) != NULL;
}
