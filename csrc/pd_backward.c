/* The reverse pass of docs/numerics.md §6.4, hand-coded over the recorded forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pd_backward.h"
#include "kernels/gemm.h"
#include "kernels/pool.h"
#include "pd_buffer.h"
#include "pd_tensor.h"
#include "ops/pd_ops.h"

typedef struct {
    size_t n;
    const int *block, *kind;
    double **out;
    uint8_t *found;
} selection;

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

/* dW = sum over batch items (in order) of per-item sums over t: the reference's WGRAD. */
static void wgrad(size_t B, size_t T, size_t I, size_t O, const double *X, const double *U, double *dW) {
    for (size_t b = 0; b < B; b++)
        pd_mm_tn(I, T, O, X + b * T * I, I, U + b * T * O, O, dW, O, b > 0);
}

typedef struct {
    double *grad;
    const double *adj;
    int bad;
} grad_ctx;

static void grad_check_task(void *vctx, size_t begin, size_t end) {
    grad_ctx *c = vctx;
    int ok = 1;
    for (size_t x = begin; x < end; x++) ok &= isfinite(c->adj[x]) && isfinite(c->grad[x] + c->adj[x]);
    if (!ok) c->bad = 1;
}

static void grad_commit_task(void *vctx, size_t begin, size_t end) {
    grad_ctx *c = vctx;
    for (size_t x = begin; x < end; x++) c->grad[x] = c->grad[x] + c->adj[x];
}

typedef struct {
    size_t W;
    double *head;
    const double *gather;
    const uint8_t *touched;
} emb_ctx;

/* grad[E] = (0.0 + dE_head) + dE_gather, rows independent */
static void emb_sum_task(void *vctx, size_t begin, size_t end) {
    emb_ctx *c = vctx;
    const size_t W = c->W;
    for (size_t v = begin; v < end; v++) {
        double *hr = c->head + v * W;
        const double *gr = c->gather + v * W;
        if (c->touched[v])
            for (size_t w = 0; w < W; w++) hr[w] = (0.0 + hr[w]) + gr[w];
        else
            for (size_t w = 0; w < W; w++) hr[w] = 0.0 + hr[w];
    }
}

#define CHECK_FINITE(buf, n, blk, kind)                                                 \
    do {                                                                                \
        size_t where_;                                                                  \
        if (!pd_all_finite((buf), (n), &where_)) {                                      \
            st = pd_fail(e, PD_ERR_NONFINITE, where_, (buf)[where_], (blk), (kind));    \
            goto done;                                                                  \
        }                                                                               \
    } while (0)

pd_status pd_graph_backward(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                            double **out, uint8_t *found, pd_error *e) {
    const pd_model *m = g->model;
    const pd_config *c = &m->cfg;
    const size_t B = g->B, T = g->T, N = g->N, W = c->model_width, F = c->feed_forward_width;
    const size_t V = c->vocabulary_size, L = c->layers, KVD = m->kv_width, D = m->head_width;
    const size_t H = c->heads, KVH = c->kv_heads, np = m->n_params;
    selection sel = {n_sel, sel_block, sel_kind, out, found};
    pd_status st = PD_OK;
    if (!g->has_loss) return pd_fail(e, PD_ERR_NO_LOSS, 0, 0.0, -1, -1);
    if (!g->recorded) return pd_fail(e, PD_ERR_NOT_RECORDED, 0, 0.0, -1, -1);
    for (size_t i = 0; i < np; i++)
        if (m->params[i]->revision != g->revisions[i])
            return pd_fail(e, PD_ERR_STALE, i, 0.0, -1, -1);
    for (size_t i = 0; i < n_sel; i++) found[i] = 0;

    /* parameter adjoints, then activation adjoints */
    size_t total = 0;
    for (size_t i = 0; i < np; i++) total += m->params[i]->size;
    double **adj = calloc(np, sizeof(double *));
    uint8_t *touched = calloc(V, 1); /* embedding rows the gather contribution reaches */
    const size_t scratch = N * V + V * W + 10 * N * W + 5 * N * KVD + 4 * N * F + 3 * N;
    /* pooled and not zeroed: every buffer below is fully written before it is read */
    double *arena = pd_buf_get(total + scratch, 0, e);
    if (!adj || !arena || !touched) {
        free(adj);
        free(touched);
        pd_buf_put(arena);
        return pd_fail(e, PD_ERR_ALLOC, 0, 0.0, -1, -1);
    }
    double *p = arena;
    for (size_t i = 0; i < np; i++) { adj[i] = p; p += m->params[i]->size; }
    double *dlog = p; p += N * V;
    double *dEg = p; p += V * W;
    double *A = p; p += N * W;
    double *AA = p; p += N * W;
    double *dfo = p; p += N * W;
    double *d_an = p; p += N * W;
    double *d_fn = p; p += N * W;
    double *d_mg = p; p += N * W;
    double *dO = p; p += N * W;
    double *dql = p; p += N * W;
    double *dqh = p; p += N * W;
    double *dq = p; p += N * W;
    double *dkr = p; p += N * KVD;
    double *dkh = p; p += N * KVD;
    double *dk = p; p += N * KVD;
    double *dvh = p; p += N * KVD;
    double *dv = p; p += N * KVD;
    double *d_pr = p; p += N * F;
    double *d_gs = p; p += N * F;
    double *d_up = p; p += N * F;
    double *d_gl = p; p += N * F;
    double *capr = p; p += N;
    double *capm = p; p += N;

    const double *E = m->params[0]->value;
    const double one = 1.0;
    capture(&sel, -1, PD_N_LOSS, &one, 1);

    /* loss -> logits -> tied head */
    pd_nll_backward(N, V, g->prob, g->targets, g->valid, g->n_targets, dlog);
    capture(&sel, -1, PD_N_LOGITS, dlog, N * V);
    pd_mm_nn(N, V, W, dlog, V, E, W, dfo, W, 0);
    CHECK_FINITE(dfo, N * W, -1, PD_N_FINAL_NORM_OUTPUT);
    capture(&sel, -1, PD_N_FINAL_NORM_OUTPUT, dfo, N * W);
    for (size_t b = 0; b < B; b++)
        pd_mm_tn(V, T, W, dlog + b * T * V, V, g->fo + b * T * W, W, adj[0], W, b > 0);

    /* final norm */
    const double *xL = g->sites[2 * L];
    pd_rmsnorm_backward(N, W, dfo, xL, m->params[np - 1]->value, g->fo_z, g->fo_r, g->fo_n,
                        g->valid, NULL, A, adj[np - 1], NULL, NULL, NULL);
    CHECK_FINITE(A, N * W, -1, PD_N_ADJOINT);

    for (size_t bi = L; bi-- > 0;) {
        const pd_block_rec *r = &g->blocks[bi];
        pd_param *const *P = m->params + 1 + 9 * bi;
        double **G = adj + 1 + 9 * bi;
        const int blk = (int)bi;
        const double *x = g->sites[2 * bi];
        capture(&sel, blk, PD_N_BLOCK_OUTPUT, A, N * W);
        capture(&sel, blk, PD_N_FFN_OUTPUT, A, N * W);
        /* feed-forward branch: the residual add hands A unchanged to dn */
        pd_mm_nt(N, W, F, A, W, P[PD_P_WD]->value, W, d_pr, F, 0);
        wgrad(B, T, F, W, r->pr, A, G[PD_P_WD]);
        CHECK_FINITE(d_pr, N * F, blk, PD_N_PRODUCT);
        capture(&sel, blk, PD_N_PRODUCT, d_pr, N * F);
        pd_swiglu_backward(N * F, d_pr, r->up, r->gs, r->sg, r->gl, d_gs, d_up, d_gl);
        CHECK_FINITE(d_gl, N * F, blk, PD_N_GATE_LINEAR);
        CHECK_FINITE(d_up, N * F, blk, PD_N_UP);
        capture(&sel, blk, PD_N_GATE_SILU, d_gs, N * F);
        capture(&sel, blk, PD_N_UP, d_up, N * F);
        capture(&sel, blk, PD_N_GATE_LINEAR, d_gl, N * F);
        wgrad(B, T, W, F, r->fn, d_up, G[PD_P_WU]);
        wgrad(B, T, W, F, r->fn, d_gl, G[PD_P_WG]);
        pd_mm_nt(N, F, W, d_up, F, P[PD_P_WU]->value, F, d_fn, W, 0);
        pd_mm_nt(N, F, W, d_gl, F, P[PD_P_WG]->value, F, d_fn, W, 1);
        CHECK_FINITE(d_fn, N * W, blk, PD_N_FFN_NORM_OUTPUT);
        capture(&sel, blk, PD_N_FFN_NORM_OUTPUT, d_fn, N * W);
        pd_rmsnorm_backward(N, W, d_fn, r->aa, P[PD_P_FFN_GAIN]->value, r->fn_z, r->fn_r, r->fn_n,
                            g->valid, A, AA, G[PD_P_FFN_GAIN], NULL, NULL, NULL);
        CHECK_FINITE(AA, N * W, blk, PD_N_AFTER_ATTENTION);
        capture(&sel, blk, PD_N_AFTER_ATTENTION, AA, N * W);
        capture(&sel, blk, PD_N_ATTN_OUTPUT, AA, N * W);

        /* attention branch: the residual add hands AA unchanged to ao */
        pd_mm_nt(N, W, W, AA, W, P[PD_P_WO]->value, W, d_mg, W, 0);
        wgrad(B, T, W, W, r->mg, AA, G[PD_P_WO]);
        CHECK_FINITE(d_mg, N * W, blk, PD_N_MERGED);
        capture(&sel, blk, PD_N_MERGED, d_mg, N * W);
        pd_split_heads(B, T, H, D, d_mg, dO);
        capture(&sel, blk, PD_N_HEAD_OUTPUTS, dO, N * W);
        pd_attn_geom geom = {B, T, H, KVH, D, g->valid, g->seg_start, g->seg_end};
        st = pd_attention_backward(&geom, r->qr, r->kr, r->vh, r->pm, dO, dql, dkr, dvh, e);
        if (st != PD_OK) goto done;
        CHECK_FINITE(dql, N * W, blk, PD_N_ROT_QUERY_HEADS);
        CHECK_FINITE(dkr, N * KVD, blk, PD_N_ROT_KEY_HEADS);
        CHECK_FINITE(dvh, N * KVD, blk, PD_N_VALUE_HEADS);
        capture(&sel, blk, PD_N_ROT_QUERY_HEADS, dql, N * W);
        capture(&sel, blk, PD_N_ROT_KEY_HEADS, dkr, N * KVD);
        capture(&sel, blk, PD_N_VALUE_HEADS, dvh, N * KVD);
        pd_rope_apply(B, H, T, D, g->pos, m->rope_sin, m->rope_cos, dql, dqh, 1);
        pd_rope_apply(B, KVH, T, D, g->pos, m->rope_sin, m->rope_cos, dkr, dkh, 1);
        capture(&sel, blk, PD_N_QUERY_HEADS, dqh, N * W);
        capture(&sel, blk, PD_N_KEY_HEADS, dkh, N * KVD);
        pd_merge_heads(B, T, H, D, dqh, dq);
        pd_merge_heads(B, T, KVH, D, dkh, dk);
        pd_merge_heads(B, T, KVH, D, dvh, dv);
        wgrad(B, T, W, W, r->an, dq, G[PD_P_WQ]);
        wgrad(B, T, W, KVD, r->an, dk, G[PD_P_WK]);
        wgrad(B, T, W, KVD, r->an, dv, G[PD_P_WV]);
        pd_mm_nt(N, KVD, W, dv, KVD, P[PD_P_WV]->value, KVD, d_an, W, 0);
        pd_mm_nt(N, KVD, W, dk, KVD, P[PD_P_WK]->value, KVD, d_an, W, 1);
        pd_mm_nt(N, W, W, dq, W, P[PD_P_WQ]->value, W, d_an, W, 1);
        CHECK_FINITE(d_an, N * W, blk, PD_N_ATTN_NORM_OUTPUT);
        capture(&sel, blk, PD_N_ATTN_NORM_OUTPUT, d_an, N * W);
        const int want_n = wants(&sel, blk, PD_N_ATTN_NORMALIZED);
        const int want_r = wants(&sel, blk, PD_N_ATTN_INVERSE_RMS);
        const int want_m = wants(&sel, blk, PD_N_ATTN_MEAN_SQUARE);
        pd_rmsnorm_backward(N, W, d_an, x, P[PD_P_ATTN_GAIN]->value, r->an_z, r->an_r, r->an_n,
                            g->valid, AA, A, G[PD_P_ATTN_GAIN], want_n ? dq : NULL,
                            want_r ? capr : NULL, want_m ? capm : NULL);
        CHECK_FINITE(A, N * W, blk, PD_N_ADJOINT);
        if (want_n) capture(&sel, blk, PD_N_ATTN_NORMALIZED, dq, N * W);
        if (want_r) capture(&sel, blk, PD_N_ATTN_INVERSE_RMS, capr, N);
        if (want_m) capture(&sel, blk, PD_N_ATTN_MEAN_SQUARE, capm, N);
    }
    capture(&sel, -1, PD_N_EMBEDDING, A, N * W);

    /* embedding: tied-head part plus the pre-summed gather part */
    /* dEg is only defined on touched rows; elsewhere it is +0.0 and (0.0 + h) + 0.0 == 0.0 + h */
    for (size_t p = 0; p < N; p++)
        if (g->valid[p] && !touched[g->ids[p]]) {
            touched[g->ids[p]] = 1;
            memset(dEg + (size_t)g->ids[p] * W, 0, W * sizeof(double));
        }
    pd_embedding_backward(N, W, A, g->ids, g->valid, dEg);
    {
        emb_ctx ec = {W, adj[0], dEg, touched};
        pd_parallel_for(V, 1 + 16384 / (W ? W : 1), emb_sum_task, &ec);
    }

    /* commit only when every adjoint and every updated gradient is finite */
    for (size_t i = 0; i < np; i++) {
        const pd_param *q = m->params[i];
        grad_ctx gc = {q->grad, adj[i], 0};
        pd_parallel_for(q->size, 32768, grad_check_task, &gc);
        if (!gc.bad) continue;
        for (size_t x = 0; x < q->size; x++) { /* the first offending element, in order */
            const double nv = q->grad[x] + adj[i][x];
            if (!isfinite(adj[i][x]) || !isfinite(nv)) {
                st = pd_fail(e, PD_ERR_NONFINITE, x, nv, (int)i, PD_N_GRADIENT);
                goto done;
            }
        }
    }
    for (size_t i = 0; i < np; i++) {
        grad_ctx gc = {m->params[i]->grad, adj[i], 0};
        pd_parallel_for(m->params[i]->size, 32768, grad_commit_task, &gc);
    }
done:
    free(adj);
    free(touched);
    pd_buf_put(arena);
    return st;
}
