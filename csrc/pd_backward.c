/* SPDX-License-Identifier: MIT */
/* The reverse pass of docs/numerics.md §6.4, hand-coded over the recorded forward: the forward
 * read backwards, one VJP per line. */
#include <stdlib.h>
#include <string.h>
#include "pd_backward.h"
#include "kernels/gemm.h"
#include "kernels/pool.h"
#include "pd_buffer.h"
#include "pd_checksum.h"
#include "pd_grad_txn.h"
#include "pd_interrupt.h"
#include "pd_shapes.h"
#include "pd_tensor.h"
#include "ops/attention.h"
#include "ops/branch.h"
#include "ops/embedding.h"
#include "ops/heads.h"
#include "ops/loss.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "kernels/nonfinite.h"


/* The (block, kind) values whose completed adjoints the caller asked for. */
typedef struct {
    size_t n;
    const int *block, *kind;
    double **out;
    uint8_t *found;
} selection;

/* Adjoints of one block's values (reused by every block), named after the value they belong to. */
typedef struct {
    double *product, *gate_silu, *up, *gate_linear; /* [N, F] */
    double *ffn_norm_out, *merged;                   /* [N, W] */
    double *head_outputs, *rot_query_heads, *query_heads; /* [B, H, T, D] */
    double *query;                                   /* [N, W]; later the normalized adjoint */
    double *rot_key_heads, *key_heads, *value_heads; /* [B, K, T, D] */
    double *key, *value;                             /* [N, KD] */
    double *attn_norm_out;                           /* [N, W] */
    double *branch;                                  /* [N, W] mu times a site adjoint; NULL without multipliers */
    double *inverse_rms, *mean_square;               /* [N], filled only on request */
} block_adjoints;

/* Everything one reverse pass writes: the adjoints, carved from one pooled arena, and the
 * parameter contributions of its transaction. */
typedef struct {
    pd_grad_txn *txn;       /* the pass's transaction: complete direct contributions settle early */
    double **grad;          /* [n_params]: the transaction's contribution to each parameter gradient */
    const uint8_t *direct;  /* [n_params]: grad[i] is the parameter's own all-(+0.0) gradient */
    double *logits;         /* [N, V] adjoint of the logits, written over the graph's prob */
    double *final_norm_out; /* [N, W] adjoint of the final norm output */
    double *residual;       /* [N, W] adjoint of the current residual site (block input/output) */
    double *after_attn;     /* [N, W] adjoint of the current block's after_attention site */
    double *gather;         /* [N, W] the lookup's pre-summed contribution, one row per touched id */
    uint8_t *touched;       /* [V] embedding rows the lookup reaches */
    size_t *gather_row;     /* [V] the gather row of a touched embedding row */
    int64_t *gather_ids;    /* [N] each position's gather row */
    block_adjoints d;
    double *arena;
    pd_csum *csum;          /* [n_params] or NULL: the terms of the weights the pass packs */
    int head_bad;           /* E's head contribution, committed early, holds a non-finite value */
    int kept;               /* gather_ids and arena are the graph's (kept_gather, kept_arena) */
} backward_scratch;

/* Parameter i's checksum slot in this pass, if the pass gathers them; wsum: block b's slot k. */
static pd_csum *csum_of(const backward_scratch *s, size_t i) { return s->csum ? &s->csum[i] : NULL; }
static pd_csum *wsum(const backward_scratch *s, size_t b, int k) { return csum_of(s, pd_block_param(b, k)); }

/* Copies a completed adjoint (canonical zeros) into every request for (block, kind). */
static void capture(const selection *s, int block, int kind, const double *src, size_t n) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->block[i] != block || s->kind[i] != kind) continue;
        for (size_t x = 0; x < n; x++) s->out[i][x] = 0.0 + src[x];
        s->found[i] = 1;
    }
}

static int wants(const selection *s, int block, int kind) {
    for (size_t i = 0; i < s->n; i++)
        if (s->block[i] == block && s->kind[i] == kind) return 1;
    return 0;
}

/* A completed adjoint: refused when not finite, else handed to every request for it. */
static pd_status completed(const selection *s, int block, int kind, const double *v, size_t n,
                           pd_error *e) {
    PD_TRY(pd_check_finite(v, n, block, kind, e));
    capture(s, block, kind, v, n);
    return PD_OK;
}

/* completed() for a value whose finiteness its writer noted: scanned only when it found a bad one. */
static pd_status completed_noted(const selection *s, int block, int kind, const double *v, size_t n, int bad,
                                 pd_error *e) {
    if (bad) PD_TRY(pd_check_finite(v, n, block, kind, e));
    capture(s, block, kind, v, n);
    return PD_OK;
}

/* dW = sum over batch items (in order) of per-item sums over t: the weight rule of §6.2. */
static void wgrad(size_t B, size_t T, size_t I, size_t O, const double *X, const double *U, double *dW) {
    for (size_t b = 0; b < B; b++)
        pd_mm_tn(I, T, O, X + b * T * I, I, U + b * T * O, O, dW, O, b > 0);
}

/* Block b's weight k: its whole contribution, committed at once while it is in cache (the
 * block's weights have no other writer in the pass). */
static void wgrad_block(const pd_graph *g, backward_scratch *s, size_t b, int k, size_t I, size_t O,
                        const double *X, const double *U) {
    const size_t i = pd_block_param(b, k);
    wgrad(g->B, g->T, I, O, X, U, s->grad[i]);
    pd_grad_txn_settle(s->txn, g->model, i);
}

/* RMSNorm VJP (§6.2): out = (((0 + res) + c_n) + c_s) + c_s, dgain, optional captures. */
static void norm_backward(const pd_graph *g, const double *u, const double *x, const double *gain,
                          const pd_norm_rec *r, const pd_norm_grads *d) {
    const pd_config *c = &g->model->cfg;
    const pd_norm_geom geom = {g->N, c->model_width, c->rms_epsilon, g->valid};
    pd_rmsnorm_backward(&geom, u, x, gain, r, d);
}

/* The saved softmax again when an earlier pass wrote its logits adjoint over it: the same
 * deterministic forward, so the same bits (a lean record first makes its logits again). */
static pd_status prob_ready(pd_graph *g, pd_error *e) {
    if (!g->prob_spent) return PD_OK;
    const size_t N = g->N, V = g->model->cfg.vocabulary_size;
    if (g->lean) pd_graph_head(g); /* its probabilities were written over the logits */
    double *nll = malloc((N ? N : 1) * sizeof(double)), loss;
    size_t count;
    if (!nll) return pd_fail(e, PD_ERR_ALLOC, N, 0.0, -1, -1);
    const pd_nll_targets t = {N, V, g->targets, g->valid};
    pd_status st = pd_nll_forward(&t, g->logits, g->prob, nll, &loss, &count, e);
    free(nll);
    if (st == PD_OK) g->prob_spent = 0;
    return st;
}

/* A lean record's SiLU parts and gated product, made again in the shared spare set by the
 * forward's own loops: the same bits the forward checked. */
static void swiglu_again(const pd_graph *g, const pd_block_rec *r) {
    const size_t NF = g->N * g->model->cfg.feed_forward_width;
    double *const *rec = r->v;
    pd_swiglu_forward(NF, rec[PD_N_GATE_LINEAR], rec[PD_N_UP], rec[PD_V_GATE_SIGMOID], rec[PD_N_GATE_SILU],
                      rec[PD_N_PRODUCT]);
}

/* dE_head (E is used transposed). A gradient that takes it directly gets it in row blocks of
 * about half a megabyte, each committed while in cache; the lookup's rows then add to committed
 * values, which the commit's 0.0 + would leave as they are (never -0.0). Each batch's final norm
 * output, every block's B, is packed once for all of them. */
static void head_wgrad(const pd_graph *g, backward_scratch *s) {
    const size_t B = g->B, T = g->T, W = g->model->cfg.model_width, V = g->model->cfg.vocabulary_size;
    const size_t E = PD_LEAD_EMBEDDING, block = (PD_HEAD_BLOCK / (W ? W : 1)) / 64 * 64;
    double *dE = s->grad[E];
    if (!pd_grad_txn_settles(s->txn, E) || block == 0) {
        wgrad(B, T, V, W, s->logits, g->final_norm.out, dE);
        return;
    }
    pd_b_panels *out = V > block ? malloc(B * sizeof *out) : NULL; /* NULL: each block packs B */
    for (size_t b = 0; out && b < B; b++) pd_b_panels_pack(&out[b], T, W, g->final_norm.out + b * T * W, W);
    for (size_t v0 = 0; v0 < V; v0 += block) {
        const size_t rows = V - v0 < block ? V - v0 : block;
        for (size_t b = 0; b < B; b++) {
            const double *a = s->logits + b * T * V + v0;
            if (out) pd_mm_tn_panels(rows, a, V, &out[b], dE + v0 * W, W, b > 0);
            else pd_mm_tn(rows, T, W, a, V, g->final_norm.out + b * T * W, W, dE + v0 * W, W, b > 0);
        }
        if (pd_grad_txn_settle_range(s->txn, E, v0 * W, (v0 + rows) * W)) s->head_bad = 1;
    }
    for (size_t b = 0; out && b < B; b++) pd_b_panels_free(&out[b]);
    free(out);
}

/* Loss -> logits -> tied head -> final norm: leaves the adjoint of x_L in s->residual. The
 * logits adjoint overwrites the saved softmax, its only reader. */
static pd_status head_backward(pd_graph *g, const selection *sel, backward_scratch *s,
                               pd_error *e) {
    const pd_model *m = g->model;
    const size_t B = g->B, T = g->T, N = g->N, W = m->cfg.model_width, V = m->cfg.vocabulary_size;
    const double *E = m->params[PD_LEAD_EMBEDDING]->value, one = 1.0;
    const size_t final_gain = pd_trailing_param(m->cfg.layers, PD_TAIL_FINAL_GAIN);
    capture(sel, -1, PD_N_LOSS, &one, 1);
    PD_TRY(prob_ready(g, e));
    s->logits = g->prob;
    g->prob_spent = 1;
    const pd_nll_targets t = {N, V, g->targets, g->valid};
    pd_nll_backward(&t, g->prob, g->n_targets, s->logits);
    capture(sel, -1, PD_N_LOGITS, s->logits, N * V);
    pd_mm_nn_sum(N, V, W, s->logits, V, E, W, s->final_norm_out, W, 0, csum_of(s, PD_LEAD_EMBEDDING));
    PD_TRY(completed(sel, -1, PD_N_FINAL_NORM_OUTPUT, s->final_norm_out, N * W, e));
    head_wgrad(g, s);
    const pd_norm_grads d_final_norm = {NULL, s->residual, s->grad[final_gain], NULL, NULL, NULL};
    norm_backward(g, s->final_norm_out, g->sites[2 * m->cfg.layers], m->params[final_gain]->value,
                  &g->final_norm, &d_final_norm);
    return pd_check_finite(s->residual, N * W, -1, PD_N_ADJOINT, e);
}

/* The adjoint of a branch's unscaled product: the site adjoint u itself when mu == 1.0, else
 * mu * u rounded once into scratch (docs/numerics.md §6.4). */
static pd_status branch_adjoint(double mu, const double *u, double *scratch, size_t n, int blk,
                                const double **out, pd_error *e) {
    if (mu == 1.0) return PD_OK;
    pd_scale_vec(n, mu, u, scratch);
    *out = scratch;
    return pd_check_finite(scratch, n, blk, PD_N_ADJOINT, e);
}

/* block_forward read backwards: s->residual holds the adjoint of the block output on entry and
 * the adjoint of its input on return. */
static pd_status block_backward(const pd_graph *g, size_t b, const selection *sel,
                                backward_scratch *s, pd_error *e) {
    const pd_model *m = g->model;
    const pd_config *c = &m->cfg;
    const size_t B = g->B, T = g->T, N = g->N, W = c->model_width, F = c->feed_forward_width;
    const size_t KVD = m->kv_width, D = m->head_width, H = c->heads, KVH = c->kv_heads;
    const pd_block_rec *r = &g->blocks[b];
    double *const *rec = r->v;
    const pd_norm_rec attn_norm = pd_block_attn_norm(r), ffn_norm = pd_block_ffn_norm(r);
    pd_param *const *P = pd_model_block(m, b);
    double **G = s->grad + pd_block_param(b, 0);
    block_adjoints *d = &s->d;
    double *A = s->residual, *AA = s->after_attn;
    const int blk = (int)b;
    capture(sel, blk, PD_N_BLOCK_OUTPUT, A, N * W);
    capture(sel, blk, PD_N_FFN_OUTPUT, A, N * W); /* the residual add hands A unchanged to ffn_out */
    if (g->lean) swiglu_again(g, r);
    const double mu = pd_model_branch(m, b);
    const double *u_ffn = A; /* the adjoint of the unscaled ffn product */
    PD_TRY(branch_adjoint(mu, A, d->branch, N * W, blk, &u_ffn, e));
    pd_mm_nt_sum(N, W, F, u_ffn, W, P[PD_P_WD]->value, W, d->product, F, 0, wsum(s, b, PD_P_WD));
    wgrad_block(g, s, b, PD_P_WD, F, W, rec[PD_N_PRODUCT], u_ffn);
    const pd_swiglu_saved gate = {rec[PD_N_UP], rec[PD_N_GATE_SILU], rec[PD_V_GATE_SIGMOID],
                                  rec[PD_N_GATE_LINEAR]};
    const pd_swiglu_grads d_gate = {wants(sel, blk, PD_N_GATE_SILU) ? d->gate_silu : NULL, d->up, d->gate_linear};
    const int bad = pd_swiglu_backward(N * F, d->product, &gate, &d_gate); /* checks its input too */
    PD_TRY(completed_noted(sel, blk, PD_N_PRODUCT, d->product, N * F, bad & PD_BAD_PRODUCT, e));
    PD_TRY(completed_noted(sel, blk, PD_N_GATE_LINEAR, d->gate_linear, N * F, bad & PD_BAD_GATE_LINEAR, e));
    PD_TRY(completed_noted(sel, blk, PD_N_UP, d->up, N * F, bad & PD_BAD_UP, e));
    capture(sel, blk, PD_N_GATE_SILU, d->gate_silu, N * F);
    wgrad_block(g, s, b, PD_P_WU, W, F, rec[PD_N_FFN_NORM_OUTPUT], d->up);
    wgrad_block(g, s, b, PD_P_WG, W, F, rec[PD_N_FFN_NORM_OUTPUT], d->gate_linear);
    pd_mm_nt_sum(N, F, W, d->up, F, P[PD_P_WU]->value, F, d->ffn_norm_out, W, 0, wsum(s, b, PD_P_WU));
    pd_mm_nt_sum(N, F, W, d->gate_linear, F, P[PD_P_WG]->value, F, d->ffn_norm_out, W, 1, wsum(s, b, PD_P_WG));
    PD_TRY(completed(sel, blk, PD_N_FFN_NORM_OUTPUT, d->ffn_norm_out, N * W, e));
    const pd_norm_grads d_ffn_norm = {A, AA, G[PD_P_FFN_GAIN], NULL, NULL, NULL};
    norm_backward(g, d->ffn_norm_out, rec[PD_N_AFTER_ATTENTION], P[PD_P_FFN_GAIN]->value, &ffn_norm,
                  &d_ffn_norm);
    PD_TRY(completed(sel, blk, PD_N_AFTER_ATTENTION, AA, N * W, e));
    capture(sel, blk, PD_N_ATTN_OUTPUT, AA, N * W); /* the residual add hands AA unchanged to attn_out */
    const double *u_attn = AA; /* the adjoint of the unscaled attention product */
    PD_TRY(branch_adjoint(mu, AA, d->branch, N * W, blk, &u_attn, e));
    pd_mm_nt_sum(N, W, W, u_attn, W, P[PD_P_WO]->value, W, d->merged, W, 0, wsum(s, b, PD_P_WO));
    wgrad_block(g, s, b, PD_P_WO, W, W, rec[PD_N_MERGED], u_attn);
    const int bad_merged = pd_split_heads(B, T, H, D, d->merged, d->head_outputs); /* checks merged too */
    PD_TRY(completed_noted(sel, blk, PD_N_MERGED, d->merged, N * W, bad_merged, e));
    capture(sel, blk, PD_N_HEAD_OUTPUTS, d->head_outputs, N * W);
    pd_attn_geom geom = {B, T, H, KVH, D, g->valid, g->seg_start, g->seg_end};
    const pd_attn_in attn = {rec[PD_N_ROT_QUERY_HEADS], rec[PD_N_ROT_KEY_HEADS], rec[PD_N_VALUE_HEADS]};
    const pd_attn_grads d_qkv = {d->rot_query_heads, d->rot_key_heads, d->value_heads};
    PD_TRY(pd_attention_backward(&geom, &attn, rec[PD_N_WEIGHTS], d->head_outputs, &d_qkv, e));
    const pd_rope rope = {B, T, D, g->pos, m->rope_sin, m->rope_cos}; /* its reads are checked too */
    /* the inverse rotations merge their heads into token rows in the same sweep */
    const int bad_rq = pd_rope_unrotate_merge(&rope, H, d->rot_query_heads, d->query_heads, d->query);
    const int bad_rk = pd_rope_unrotate_merge(&rope, KVH, d->rot_key_heads, d->key_heads, d->key);
    const int bad_v = pd_merge_heads(B, T, KVH, D, d->value_heads, d->value);
    PD_TRY(completed_noted(sel, blk, PD_N_ROT_QUERY_HEADS, d->rot_query_heads, N * W, bad_rq, e));
    PD_TRY(completed_noted(sel, blk, PD_N_ROT_KEY_HEADS, d->rot_key_heads, N * KVD, bad_rk, e));
    PD_TRY(completed_noted(sel, blk, PD_N_VALUE_HEADS, d->value_heads, N * KVD, bad_v, e));
    capture(sel, blk, PD_N_QUERY_HEADS, d->query_heads, N * W);
    capture(sel, blk, PD_N_KEY_HEADS, d->key_heads, N * KVD);
    wgrad_block(g, s, b, PD_P_WQ, W, W, rec[PD_N_ATTN_NORM_OUTPUT], d->query);
    wgrad_block(g, s, b, PD_P_WK, W, KVD, rec[PD_N_ATTN_NORM_OUTPUT], d->key);
    wgrad_block(g, s, b, PD_P_WV, W, KVD, rec[PD_N_ATTN_NORM_OUTPUT], d->value);
    pd_mm_nt_sum(N, KVD, W, d->value, KVD, P[PD_P_WV]->value, KVD, d->attn_norm_out, W, 0, wsum(s, b, PD_P_WV));
    pd_mm_nt_sum(N, KVD, W, d->key, KVD, P[PD_P_WK]->value, KVD, d->attn_norm_out, W, 1, wsum(s, b, PD_P_WK));
    pd_mm_nt_sum(N, W, W, d->query, W, P[PD_P_WQ]->value, W, d->attn_norm_out, W, 1, wsum(s, b, PD_P_WQ));
    PD_TRY(completed(sel, blk, PD_N_ATTN_NORM_OUTPUT, d->attn_norm_out, N * W, e));
    double *cap_n = wants(sel, blk, PD_N_ATTN_NORMALIZED) ? d->query : NULL; /* d->query is free again */
    double *cap_r = wants(sel, blk, PD_N_ATTN_INVERSE_RMS) ? d->inverse_rms : NULL;
    double *cap_m = wants(sel, blk, PD_N_ATTN_MEAN_SQUARE) ? d->mean_square : NULL;
    const pd_norm_grads d_attn_norm = {AA, A, G[PD_P_ATTN_GAIN], cap_n, cap_r, cap_m};
    norm_backward(g, d->attn_norm_out, g->sites[2 * b], P[PD_P_ATTN_GAIN]->value, &attn_norm, &d_attn_norm);
    PD_TRY(pd_check_finite(A, N * W, blk, PD_N_ADJOINT, e));
    if (cap_n) capture(sel, blk, PD_N_ATTN_NORMALIZED, cap_n, N * W);
    if (cap_r) capture(sel, blk, PD_N_ATTN_INVERSE_RMS, cap_r, N);
    if (cap_m) capture(sel, blk, PD_N_ATTN_MEAN_SQUARE, cap_m, N);
    return PD_OK;
}

typedef struct {
    size_t W;
    double *head;
    const double *gather;
    const uint8_t *touched;
    const size_t *gather_row;
    int direct; /* head is E's own gradient: its commit adds +0.0 to every element anyway */
    int settled; /* head was committed already (head_wgrad): only the touched rows change */
    int bad;     /* settled: a touched row's sum is not finite */
} emb_ctx;

/* grad[E] = (0.0 + dE_head) + dE_gather, rows independent. A direct contribution commits as
 * 0.0 + c, so its untouched rows need no 0.0 + h here: 0.0 + (0.0 + h) is 0.0 + h. */
static void emb_sum_task(void *vctx, size_t begin, size_t end) {
    emb_ctx *c = vctx;
    const size_t W = c->W;
    uint64_t any = 0;
    for (size_t v = begin; v < end; v++) {
        double *hr = c->head + v * W;
        const double *gr = c->touched[v] ? c->gather + c->gather_row[v] * W : NULL;
        if (gr)
            for (size_t w = 0; w < W; w++) {
                hr[w] = (0.0 + hr[w]) + gr[w];
                any |= pd_nonfinite_bit(hr[w]);
            }
        else if (!c->direct)
            for (size_t w = 0; w < W; w++) hr[w] = 0.0 + hr[w];
    }
    if (c->settled && any >> 63) c->bad = 1;
}

/* The lookup's contribution, pre-summed over repeated ids, added after the tied head's. */
static void embedding_backward(const pd_graph *g, backward_scratch *s) {
    const size_t N = g->N, W = g->model->cfg.model_width, V = g->model->cfg.vocabulary_size;
    /* one gather row per touched id (at most N, not V); untouched rows get +0.0 from the
     * lookup, and (0.0 + h) + 0.0 == 0.0 + h */
    size_t rows = 0;
    for (size_t p = 0; p < N; p++) {
        if (!g->valid[p]) continue;
        const size_t id = (size_t)g->ids[p];
        if (!s->touched[id]) {
            s->touched[id] = 1;
            s->gather_row[id] = rows;
            memset(s->gather + rows++ * W, 0, W * sizeof(double));
        }
        s->gather_ids[p] = (int64_t)s->gather_row[id];
    }
    pd_embedding_backward(N, W, s->residual, s->gather_ids, g->valid, s->gather);
    const size_t E = PD_LEAD_EMBEDDING;
    const int settled = pd_grad_txn_settles(s->txn, E);
    emb_ctx ec = {W, s->grad[E], s->gather, s->touched, s->gather_row, s->direct[E], settled, 0};
    pd_parallel_for(V, 1 + 16384 / (W ? W : 1), emb_sum_task, &ec);
    if (settled) pd_grad_txn_mark(s->txn, E, s->head_bad || ec.bad);
}

/* Cuts the adjoints from c, or only measures them over a NULL base. */
static void scratch_bind(backward_scratch *s, pd_carver *c, const size_t x[PD_X_COUNT], int branch) {
    block_adjoints *d = &s->d;
    d->branch = branch ? pd_carve(c, 1, PD_S_ROWS_W, x) : NULL;
    s->gather = pd_carve(c, 1, PD_S_ROWS_W, x);
    s->residual = pd_carve(c, 1, PD_S_ROWS_W, x);
    s->after_attn = pd_carve(c, 1, PD_S_ROWS_W, x);
    s->final_norm_out = pd_carve(c, 1, PD_S_ROWS_W, x);
    d->attn_norm_out = pd_carve(c, 1, PD_S_ROWS_W, x);
    d->ffn_norm_out = pd_carve(c, 1, PD_S_ROWS_W, x);
    d->merged = pd_carve(c, 1, PD_S_ROWS_W, x);
    d->head_outputs = pd_carve(c, 1, PD_S_HEADS, x);
    d->rot_query_heads = pd_carve(c, 1, PD_S_HEADS, x);
    d->query_heads = pd_carve(c, 1, PD_S_HEADS, x);
    d->query = pd_carve(c, 1, PD_S_ROWS_W, x);
    d->rot_key_heads = pd_carve(c, 1, PD_S_KV_HEADS, x);
    d->key_heads = pd_carve(c, 1, PD_S_KV_HEADS, x);
    d->key = pd_carve(c, 1, PD_S_ROWS_KD, x);
    d->value_heads = pd_carve(c, 1, PD_S_KV_HEADS, x);
    d->value = pd_carve(c, 1, PD_S_ROWS_KD, x);
    d->product = pd_carve(c, 1, PD_S_ROWS_F, x);
    d->gate_silu = pd_carve(c, 1, PD_S_ROWS_F, x);
    d->up = pd_carve(c, 1, PD_S_ROWS_F, x);
    d->gate_linear = pd_carve(c, 1, PD_S_ROWS_F, x);
    d->inverse_rms = pd_carve(c, 1, PD_S_STAT, x);
    d->mean_square = pd_carve(c, 1, PD_S_STAT, x);
}

/* The lookup's three tables in one block, widest first, so each stays aligned: [N] ids, [V]
 * rows, [V] flags (V doubles of E exist, so the sizes cannot overflow); NULL when out of memory. */
static int64_t *gather_tables(size_t N, size_t V) {
    const size_t n_ids = N ? N : 1;
    return malloc(n_ids * sizeof(int64_t) + V * sizeof(size_t) + V);
}

/* One pooled arena for the adjoints, not zeroed: every buffer is fully written before it is
 * read. The parameter contributions are the transaction's (pd_grad_txn.h). A planned step's
 * record (unguarded) keeps its lookup tables and arena for its next pass, over the same shape. */
static pd_status scratch_alloc(backward_scratch *s, pd_graph *g, pd_grad_txn *t, pd_error *e) {
    const size_t N = g->N, V = g->model->cfg.vocabulary_size;
    size_t x[PD_X_COUNT];
    s->txn = t;
    s->grad = t->grad;
    s->direct = t->direct;
    s->kept = g->unguarded;
    s->gather_ids = g->kept_gather ? g->kept_gather : gather_tables(N, V);
    if (!s->gather_ids) return pd_fail(e, PD_ERR_ALLOC, V, 0.0, -1, -1);
    if (s->kept) g->kept_gather = s->gather_ids;
    s->gather_row = (size_t *)(s->gather_ids + (N ? N : 1));
    s->touched = (uint8_t *)(s->gather_row + V);
    memset(s->touched, 0, V);
    pd_graph_extents(g, x);
    pd_carver measure = {NULL, 0, 0};
    scratch_bind(s, &measure, x, g->model->branch != NULL);
    if (measure.overflow) return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    s->arena = g->kept_arena ? g->kept_arena : pd_buf_get(measure.used, 0, e);
    if (!s->arena) return pd_fail(e, PD_ERR_ALLOC, measure.used, 0.0, -1, -1);
    if (s->kept) g->kept_arena = s->arena;
    pd_carver cut = {s->arena, 0, 0};
    scratch_bind(s, &cut, x, g->model->branch != NULL);
    return PD_OK;
}

static void scratch_free(backward_scratch *s) {
    if (s->kept) return; /* the graph's, freed with it */
    free(s->gather_ids); /* the block of gather_row and touched too */
    pd_buf_put(s->arena);
}

/* The forward read backwards: loss and head, the blocks last to first, the embedding. */
static pd_status reverse(pd_graph *g, const selection *sel, backward_scratch *s, pd_error *e) {
    PD_TRY(head_backward(g, sel, s, e));
    for (size_t b = g->model->cfg.layers; b-- > 0;) {
        /* between blocks: a pending Ctrl-C stops the pass before anything is committed */
        if (pd_interrupt_requested()) return pd_fail(e, PD_ERR_INTERRUPTED, b, 0.0, (int)b, -1);
        PD_TRY(block_backward(g, b, sel, s, e));
    }
    capture(sel, -1, PD_N_EMBEDDING, s->residual, g->N * g->model->cfg.model_width);
    embedding_backward(g, s);
    return PD_OK;
}

pd_status pd_graph_backward(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                            double **out, uint8_t *found, pd_error *e) {
    return pd_graph_backward_pass(g, n_sel, sel_block, sel_kind, out, found, PD_PASS_COMMIT, e);
}

/* Each PD_PASS_* mode: which gradients take their contribution directly, whether it commits. */
static const struct {
    int direct, commit;
} PASS_MODES[] = {
    [PD_PASS_WAIT] = {PD_DIRECT_NONE, 0},
    [PD_PASS_COMMIT] = {PD_DIRECT_ZEROS, 1},
    [PD_PASS_WAIT_IN_PLACE] = {PD_DIRECT_ZEROS, 0},
    [PD_PASS_COMMIT_OVER] = {PD_DIRECT_OVER, 1},
};

pd_status pd_graph_backward_pass(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                                 double **out, uint8_t *found, int mode, pd_error *e) {
    if (mode < 0 || (size_t)mode >= sizeof PASS_MODES / sizeof PASS_MODES[0]) mode = PD_PASS_WAIT;
    const pd_model *m = g->model;
    /* The alias guard's values check (docs/numerics-concurrency.md C5): a pass that writes no
     * caller buffer takes the checksums from the products that pack the weights and compares
     * them after the pass, a mismatch dropping it; one that does checks first, by a pass. An
     * unguarded record (pd_graph_forward_step) has none to compare: its revisions only. */
    pd_csum *cs = n_sel == 0 && !g->unguarded ? malloc((m->n_params ? m->n_params : 1) * sizeof *cs) : NULL;
    pd_status st = cs ? pd_graph_current(g, e) : pd_graph_fresh(g, e);
    if (st != PD_OK) {
        free(cs);
        return st;
    }
    for (size_t i = 0; cs && i < m->n_params; i++) pd_csum_init(&cs[i], m->params[i]->value);
    for (size_t i = 0; i < n_sel; i++) found[i] = 0;
    const selection sel = {n_sel, sel_block, sel_kind, out, found};
    pd_grad_txn t;
    backward_scratch s;
    memset(&s, 0, sizeof s);
    s.csum = cs;
    st = pd_grad_txn_open(&t, m, PASS_MODES[mode].direct, e);
    t.eager = PASS_MODES[mode].commit;
    if (st == PD_OK) st = scratch_alloc(&s, g, &t, e);
    if (st == PD_OK) st = reverse(g, &sel, &s, e);
    scratch_free(&s);
    /* changed values outrank whatever else stopped the pass, as when they were checked first */
    const pd_status same = cs ? pd_graph_same_values(g, cs, e) : PD_OK;
    if (same != PD_OK) st = same;
    free(cs);
    return pd_grad_txn_end(g, &t, st, e);
}
