/* SPDX-License-Identifier: MIT */
/* The recorded forward pass (docs/numerics.md §5.6): the input layout, embedding, blocks, final
 * norm and tied head, and the loss. */
#include <stdlib.h>
#include <string.h>
#include "pd_forward.h"
#include "pd_grad_txn.h"
#include "pd_buffer.h"
#include "pd_checksum.h"
#include "pd_interrupt.h"
#include "pd_tensor.h"
#include "kernels/gemm.h"
#include "ops/attention.h"
#include "ops/branch.h"
#include "ops/embedding.h"
#include "ops/heads.h"
#include "ops/loss.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

#define PD_HEAD_MIN_COLS 256  /* fewer columns would make the blocks' products too thin */
#define PD_STEP_FULL_DOUBLES (1u << 17) /* 1 MiB: a full step record of small shapes, within L2 */

static pd_status norm_forward(const pd_graph *g, const double *x, const double *gain, const pd_norm_rec *r,
                              int blk, int node, pd_error *e) {
    const pd_config *c = &g->model->cfg;
    const pd_norm_geom geom = {g->N, c->model_width, c->rms_epsilon, g->valid};
    return pd_rmsnorm_forward(&geom, x, gain, r, blk, node, e);
}

/* A branch output becomes what the block adds, mu times it rounded once (docs/numerics.md §5.9);
 * mu == 1.0 leaves it untouched, so a model without multipliers keeps its bits. */
static pd_status branch_scale(double mu, double *v, size_t n, int blk, int node, pd_error *e) {
    if (mu == 1.0) return PD_OK;
    pd_scale_vec(n, mu, v, v);
    return pd_check_finite(v, n, blk, node, e);
}

/* sum = x + branch, the branch first scaled by mu (and checked before, as branch_scale needs);
 * the add notes both, and only then do the scans, branch first, name what it found. */
static pd_status residual_add(const double *x, double *branch, double *sum, size_t n, double mu, int blk,
                              int branch_node, int sum_node, pd_error *e) {
    if (mu != 1.0) {
        PD_TRY(pd_check_finite(branch, n, blk, branch_node, e));
        PD_TRY(branch_scale(mu, branch, n, blk, branch_node, e));
    }
    if (!pd_add_vec(n, x, branch, sum)) return PD_OK;
    PD_TRY(pd_check_finite(branch, n, blk, branch_node, e));
    return pd_check_finite(sum, n, blk, sum_node, e);
}

/* Parameter i's checksum slot while a recorded forward runs, else none; wsum: block b's slot k. */
static pd_csum *csum_of(const pd_graph *g, size_t i) { return g->csum ? &g->csum[i] : NULL; }
static pd_csum *wsum(const pd_graph *g, size_t b, int k) { return csum_of(g, pd_block_param(b, k)); }

/* One decoder block (docs/numerics.md §5.6), every recorded value checked as it is made. */
static pd_status block_forward(const pd_graph *g, size_t b, const double *x, pd_block_rec *r,
                               pd_error *e) {
    const pd_model *m = g->model;
    const pd_config *c = &m->cfg;
    const size_t B = g->B, T = g->T, N = g->N, W = c->model_width, F = c->feed_forward_width;
    const size_t KVD = m->kv_width, D = m->head_width;
    pd_param *const *P = pd_model_block(m, b);
    const pd_norm_rec attn_norm = pd_block_attn_norm(r), ffn_norm = pd_block_ffn_norm(r);
    double *const *rec = r->v;
    const int blk = (int)b;
    const double mu = pd_model_branch(m, b);
    PD_TRY(norm_forward(g, x, P[PD_P_ATTN_GAIN]->value, &attn_norm, blk, PD_N_ATTN_NORM_OUTPUT, e));
    const double *an = rec[PD_N_ATTN_NORM_OUTPUT];
    pd_mm_nn_sum(N, W, W, an, W, P[PD_P_WQ]->value, W, g->q, W, 0, wsum(g, b, PD_P_WQ));
    pd_mm_nn_sum(N, W, KVD, an, W, P[PD_P_WK]->value, KVD, g->k, KVD, 0, wsum(g, b, PD_P_WK));
    pd_mm_nn_sum(N, W, KVD, an, W, P[PD_P_WV]->value, KVD, g->v, KVD, 0, wsum(g, b, PD_P_WV));
    /* the splits (the query's and key's with their rotations, one sweep each) note finiteness;
     * the scans, in order, only name what they found */
    const pd_rope rope = {B, T, D, g->pos, m->rope_sin, m->rope_cos};
    if (pd_rope_split(&rope, c->heads, g->q, rec[PD_N_QUERY_HEADS], rec[PD_N_ROT_QUERY_HEADS]) |
        pd_rope_split(&rope, c->kv_heads, g->k, rec[PD_N_KEY_HEADS], rec[PD_N_ROT_KEY_HEADS]) |
        pd_split_heads(B, T, c->kv_heads, D, g->v, rec[PD_N_VALUE_HEADS])) {
        PD_TRY(pd_check_finite(g->q, N * W, blk, PD_N_QUERY_HEADS, e));
        PD_TRY(pd_check_finite(g->k, N * KVD, blk, PD_N_KEY_HEADS, e));
        PD_TRY(pd_check_finite(g->v, N * KVD, blk, PD_N_VALUE_HEADS, e));
    }
    pd_attn_geom geom = {B, T, c->heads, c->kv_heads, D, g->valid, g->seg_start, g->seg_end};
    const pd_attn_in attn = {rec[PD_N_ROT_QUERY_HEADS], rec[PD_N_ROT_KEY_HEADS], rec[PD_N_VALUE_HEADS]};
    PD_TRY(pd_attention_forward(&geom, &attn, rec[PD_N_WEIGHTS], rec[PD_N_HEAD_OUTPUTS], blk, e));
    if (pd_merge_heads(B, T, c->heads, D, rec[PD_N_HEAD_OUTPUTS], rec[PD_N_MERGED]))
        PD_TRY(pd_check_finite(rec[PD_N_HEAD_OUTPUTS], N * W, blk, PD_N_HEAD_OUTPUTS, e));
    pd_mm_nn_sum(N, W, W, rec[PD_N_MERGED], W, P[PD_P_WO]->value, W, rec[PD_N_ATTN_OUTPUT], W, 0, wsum(g, b, PD_P_WO));
    PD_TRY(residual_add(x, rec[PD_N_ATTN_OUTPUT], rec[PD_N_AFTER_ATTENTION], N * W, mu, blk, PD_N_ATTN_OUTPUT,
                        PD_N_AFTER_ATTENTION, e));
    const double *after_attn = rec[PD_N_AFTER_ATTENTION];
    PD_TRY(norm_forward(g, after_attn, P[PD_P_FFN_GAIN]->value, &ffn_norm, blk, PD_N_FFN_NORM_OUTPUT, e));
    const double *fn = rec[PD_N_FFN_NORM_OUTPUT];
    pd_mm_nn_sum(N, W, F, fn, W, P[PD_P_WG]->value, F, rec[PD_N_GATE_LINEAR], F, 0, wsum(g, b, PD_P_WG));
    /* up before the SiLU, so one pass makes the SiLU parts and the gate product and notes the
     * finiteness of all four; a failure is named as the checks in §5.5's order name it */
    pd_mm_nn_sum(N, W, F, fn, W, P[PD_P_WU]->value, F, rec[PD_N_UP], F, 0, wsum(g, b, PD_P_WU));
    if (pd_swiglu_forward(N * F, rec[PD_N_GATE_LINEAR], rec[PD_N_UP], rec[PD_V_GATE_SIGMOID],
                          rec[PD_N_GATE_SILU], rec[PD_N_PRODUCT])) {
        PD_TRY(pd_check_finite(rec[PD_N_GATE_LINEAR], N * F, blk, PD_N_GATE_LINEAR, e));
        PD_TRY(pd_check_finite(rec[PD_N_GATE_SILU], N * F, blk, PD_N_GATE_SILU, e));
        PD_TRY(pd_check_finite(rec[PD_N_UP], N * F, blk, PD_N_UP, e));
        PD_TRY(pd_check_finite(rec[PD_N_PRODUCT], N * F, blk, PD_N_PRODUCT, e));
    }
    pd_mm_nn_sum(N, F, W, rec[PD_N_PRODUCT], F, P[PD_P_WD]->value, W, rec[PD_N_FFN_OUTPUT], W, 0, wsum(g, b, PD_P_WD));
    return residual_add(rec[PD_N_AFTER_ATTENTION], rec[PD_N_FFN_OUTPUT], rec[PD_N_BLOCK_OUTPUT], N * W, mu, blk,
                        PD_N_FFN_OUTPUT, PD_N_BLOCK_OUTPUT, e);
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
    const double *E = m->params[PD_LEAD_EMBEDDING]->value;
    pd_embedding_forward(N, W, E, g->ids, g->valid, g->x0);
    const double *x = keep_site(g, 0, g->x0);
    for (size_t b = 0; b < m->cfg.layers; b++) {
        pd_block_rec *r = &g->blocks[g->recorded ? b : 0];
        if (pd_interrupt_requested()) return pd_fail(e, PD_ERR_INTERRUPTED, b, 0.0, (int)b, -1);
        PD_TRY(block_forward(g, b, x, r, e));
        keep_site(g, 2 * b + 1, r->v[PD_N_AFTER_ATTENTION]);
        x = keep_site(g, 2 * b + 2, r->v[PD_N_BLOCK_OUTPUT]);
    }
    const double *final_gain = pd_model_trailing(m, PD_TAIL_FINAL_GAIN)->value;
    PD_TRY(norm_forward(g, x, final_gain, &g->final_norm, -1, PD_N_FINAL_NORM_OUTPUT, e));
    if (!pd_graph_head(g)) PD_TRY(pd_check_finite(g->logits, N * V, -1, PD_N_LOGITS, e));
    return PD_OK;
}

/* The request checks every forward makes before it touches g. */
static pd_status forward_checks(const pd_model *m, size_t B, size_t T, const size_t *pos, int record, size_t *N,
                                pd_error *e) {
    if (B == 0 || T == 0) return pd_fail(e, PD_ERR_EMPTY, 0, 0.0, -1, -1);
    if (!pd_mul_ok(B, T, N)) return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    if (T > m->cfg.max_positions && !pos) return pd_fail(e, PD_ERR_LAYOUT, T, (double)T, -1, -1);
    if (record != PD_RECORD_NONE && record != PD_RECORD_ALL && record != PD_RECORD_TRAINING)
        return pd_fail(e, PD_ERR_RECORD_MODE, 0, (double)record, -1, -1);
    return PD_OK;
}

/* The layout, the revisions and checksums seen, and the run, over g's bound buffers; on
 * failure g is freed. */
static pd_status graph_fill_run(pd_graph *g, const int64_t *ids, const uint8_t *valid, const size_t *pos,
                                const size_t *seg_start, pd_error *e) {
    const pd_model *m = g->model;
    pd_status st = fill_layout(g, ids, valid, pos, seg_start, e);
    if (st == PD_OK) {
        for (size_t i = 0; i < m->n_params; i++) {
            g->revisions[i] = m->params[i]->revision;
            g->checksums[i] = 0;
        }
        /* only a recorded graph can run backward: inference pays nothing. Its products add the
         * terms of the weights they pack; the rest (gains) get a pass afterwards. */
        const int sums = g->recorded && !g->unguarded;
        pd_csum *cs = sums ? malloc(m->n_params * sizeof *cs) : NULL;
        for (size_t i = 0; cs && i < m->n_params; i++) pd_csum_init(&cs[i], m->params[i]->value);
        if (sums && !cs) pd_params_checksums(m->params, m->n_params, g->checksums);
        g->csum = cs;
        st = graph_run(g, e);
        g->csum = NULL;
        for (size_t i = 0; cs && st == PD_OK && i < m->n_params; i++)
            g->checksums[i] = pd_csum_result(&cs[i], m->params[i]->size);
        free(cs);
    }
    if (st != PD_OK) pd_graph_free(g);
    return st;
}

pd_status pd_graph_forward(pd_graph *g, const pd_model *m, size_t B, size_t T, const int64_t *ids,
                           const uint8_t *valid, const size_t *pos, const size_t *seg_start,
                           int record, pd_error *e) {
    size_t N;
    memset(g, 0, sizeof *g);
    g->model = m;
    PD_TRY(forward_checks(m, B, T, pos, record, &N, e));
    PD_TRY(pd_graph_alloc(g, m, B, T, record, e));
    return graph_fill_run(g, ids, valid, pos, seg_start, e);
}

/* Whether g holds the buffers of a recorded forward of m over B x T in this record mode. */
static int graph_fits(const pd_graph *g, const pd_model *m, size_t B, size_t T, int record) {
    return g->arena && g->model == m && g->B == B && g->T == T && g->recorded == (record != PD_RECORD_NONE) &&
           g->lean == (record == PD_RECORD_TRAINING);
}

/* The forward again in the buffers of a g that fits (the same bits: every buffer is written
 * before it is read); its loss goes with it. On failure g is freed. */
static pd_status forward_again(pd_graph *g, const int64_t *ids, const uint8_t *valid, const size_t *pos,
                               const size_t *seg_start, pd_error *e) {
    size_t N;
    pd_status st = forward_checks(g->model, g->B, g->T, pos, PD_RECORD_TRAINING, &N, e);
    if (st != PD_OK) {
        pd_graph_free(g);
        return st;
    }
    pd_graph_discard(g);
    g->has_loss = 0; /* the next loss replaces its NLL */
    g->n_targets = 0;
    g->loss = 0.0;
    g->prob_spent = 0;
    return graph_fill_run(g, ids, valid, pos, seg_start, e);
}

/* A step's record mode: every value while a full record stays small (PD_STEP_FULL_DOUBLES), else
 * a lean one. The lean record's savings are memory, its cost time (the reverse pass makes the
 * SiLU parts again): at small shapes that time is worth more than the memory. */
static int step_record_mode(const pd_model *m, size_t B, size_t T) {
    return pd_graph_arena_doubles(m, B, T, PD_RECORD_ALL) <= PD_STEP_FULL_DOUBLES ? PD_RECORD_ALL
                                                                                  : PD_RECORD_TRAINING;
}

pd_status pd_graph_forward_step(pd_graph *g, int planned, const pd_model *m, const pd_batch_in *in,
                                pd_error *e) {
    /* a planned g of this m and shape has the mode step_record_mode gives them (m's shapes are fixed) */
    if (planned && g->unguarded && graph_fits(g, m, in->B, in->T, g->lean ? PD_RECORD_TRAINING : PD_RECORD_ALL))
        return forward_again(g, in->ids, in->valid, in->pos, in->seg_start, e);
    if (planned) pd_graph_free(g);
    size_t N;
    memset(g, 0, sizeof *g);
    g->model = m;
    PD_TRY(forward_checks(m, in->B, in->T, in->pos, PD_RECORD_TRAINING, &N, e));
    PD_TRY(pd_graph_alloc(g, m, in->B, in->T, step_record_mode(m, in->B, in->T), e));
    g->unguarded = 1;
    return graph_fill_run(g, in->ids, in->valid, in->pos, in->seg_start, e);
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
 * where its probabilities were, which gives the same logits while E is unchanged. Blocks of
 * columns (vocabulary rows of E) of about half a megabyte, each scanned for finiteness while in
 * cache: every logit is still its own sum over W. */
int pd_graph_head(pd_graph *g) {
    const pd_model *m = g->model;
    const size_t N = g->N, W = m->cfg.model_width, V = m->cfg.vocabulary_size;
    const double *E = m->params[PD_LEAD_EMBEDDING]->value;
    size_t block = (PD_HEAD_BLOCK / (N ? N : 1)) / 64 * 64;
    if (block < PD_HEAD_MIN_COLS) block = PD_HEAD_MIN_COLS;
    int finite = 1;
    for (size_t v0 = 0; v0 < V; v0 += block) {
        const size_t cols = V - v0 < block ? V - v0 : block;
        pd_mm_nt_sum(N, W, cols, g->final_norm.out, W, E + v0 * W, W, g->logits + v0, V, 0,
                     csum_of(g, PD_LEAD_EMBEDDING));
        if (!pd_block_finite(g->logits + v0, N, V, cols)) finite = 0;
    }
    return finite;
}

pd_status pd_graph_loss(pd_graph *g, const int64_t *targets, pd_error *e) {
    const size_t N = g->N, V = g->model->cfg.vocabulary_size;
    for (size_t p = 0; p < N; p++) {
        if (!g->valid[p]) { g->targets[p] = 0; continue; }
        if (!pd_id_in_range(targets[p], V))
            return pd_fail(e, PD_ERR_TARGET, p, (double)targets[p], -1, PD_N_LOSS);
        g->targets[p] = targets[p];
    }
    /* a lean record writes the probabilities over the logits, their last reader; a planned
     * step's record (unguarded) zeroes its last NLL buffer again */
    const int reuse = g->unguarded && g->nll;
    double *prob = g->lean ? g->logits : pd_buf_get(N * V, 0, e);
    double *nll = reuse ? memset(g->nll, 0, N * sizeof(double)) : pd_zeros(N, e);
    if (!prob || !nll) {
        if (!g->lean) pd_buf_put(prob);
        if (!reuse) free(nll);
        return pd_fail(e, PD_ERR_ALLOC, N * V + N, 0.0, -1, -1);
    }
    double loss;
    size_t count;
    const pd_nll_targets t = {N, V, g->targets, g->valid};
    pd_status st = pd_nll_forward(&t, g->logits, prob, nll, &loss, &count, e);
    if (st != PD_OK) {
        if (!g->lean) pd_buf_put(prob);
        if (!reuse) free(nll);
        return st;
    }
    if (g->prob != g->logits) pd_buf_put(g->prob);
    if (!reuse) free(g->nll);
    g->prob = prob;
    g->prob_spent = 0;
    g->nll = nll;
    g->loss = loss;
    g->n_targets = count;
    g->has_loss = 1;
    return PD_OK;
}
