/* SPDX-License-Identifier: MIT */
/* Segment-causal scaled dot-product attention over head lanes (docs/numerics.md §5.3-§5.4,
 * §6.2; why the shortened sums are exact: §8). The score, mixing and gradient
 * products run through the blocked kernels one block of RB rows (or key columns) at a time,
 * over the key range the block can reach; entries outside a row's allowed keys are +0.0, so
 * the full-range sums of the reference equal these (+-0 terms never change a sum that starts
 * at +0.0), and every kept sum still runs in ascending order from +0.0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attention.h"
#include "attn_rows.h"
#include "../kernels/gemm.h"
#include "../kernels/pool.h"
#include "../pd_buffer.h"
#include "../pd_nodes.h"

/* Rows (or key columns) per product block: each diagonal block also computes its masked half,
 * so shorter blocks waste less; short products run unpacked (benchmarks/KERNELS.md). */
#define RB 32

typedef struct {
    const pd_attn_geom *a;
    const double *qr, *kr, *vh, *pm, *dO;
    double *pm_out, *ho, *dql, *dkr, *dvh;
    double kappa;
    int failed;
    size_t fail_index;
    double fail_value;
} attn_ctx;

/* First key any valid row of [i0, i1) of sequence b may attend to (i1 when none is valid). */
static size_t block_first_key(const pd_attn_geom *a, size_t b, size_t i0, size_t i1) {
    size_t lo = i1;
    for (size_t i = i0; i < i1; i++)
        if (a->valid[b * a->T + i] && a->seg_start[b * a->T + i] < lo) lo = a->seg_start[b * a->T + i];
    return lo;
}

static void forward_lanes(void *vctx, size_t begin, size_t end) {
    attn_ctx *c = vctx;
    const pd_attn_geom *a = c->a;
    const size_t T = a->T, D = a->D, grp = a->H / a->KV;
    for (size_t lane = begin; lane < end; lane++) {
        const size_t b = lane / a->H, h = lane % a->H;
        const size_t kvl = b * a->KV + h / grp;
        const double *q = c->qr + lane * T * D, *k = c->kr + kvl * T * D, *v = c->vh + kvl * T * D;
        double *pm = c->pm_out + lane * T * T, *o = c->ho + lane * T * D;
        for (size_t i0 = 0; i0 < T; i0 += RB) {
            const size_t i1 = T - i0 < RB ? T : i0 + RB, jlo = block_first_key(a, b, i0, i1);
            /* raw scores of the reachable keys, straight into the weight rows */
            if (jlo < i1) pd_mm_nt(i1 - i0, D, i1 - jlo, q + i0 * D, D, k + jlo * D, D, pm + i0 * T + jlo, T, 0);
            const pd_attn_rows rows = {T, i0, i1, a->valid + b * T, a->seg_start + b * T, c->kappa};
            size_t at = 0;
            double bad = 0.0;
            if (!pd_attn_softmax_rows(&rows, pm, &at, &bad)) {
                c->failed = 1;
                c->fail_index = lane * T * T + at;
                c->fail_value = bad;
                return;
            }
            /* o[i,d] = sum over j ascending from +0.0 of p[j]*v[j,d]; masked p are +0.0 */
            if (jlo < i1) pd_mm_nn(i1 - i0, i1 - jlo, D, pm + i0 * T + jlo, T, v + jlo * D, D, o + i0 * D, D, 0);
            else memset(o + i0 * D, 0, (i1 - i0) * D * sizeof(double));
        }
    }
}

pd_status pd_attention_forward(const pd_attn_geom *a, const pd_attn_in *in, double *pm, double *ho,
                               int block, pd_error *e) {
    attn_ctx c = {0};
    c.a = a;
    c.qr = in->q;
    c.kr = in->k;
    c.vh = in->v;
    c.pm_out = pm;
    c.ho = ho;
    c.kappa = 1.0 / sqrt((double)a->D);
    /* a lane's two products hold about T*T*D multiply-adds */
    const double lane_work = (double)a->T * (double)a->T * (double)a->D;
    pd_parallel_for(a->B * a->H, pd_grain(lane_work), forward_lanes, &c);
    if (c.failed) return pd_fail(e, PD_ERR_NONFINITE, c.fail_index, c.fail_value, block, PD_N_ATTN_SCORES);
    return PD_OK;
}

static void backward_kv_lanes(void *vctx, size_t begin, size_t end) {
    attn_ctx *c = vctx;
    const pd_attn_geom *a = c->a;
    const size_t T = a->T, D = a->D, grp = a->H / a->KV;
    double *ds = pd_buf_get(T * T, 0, NULL); /* one lane's score gradients */
    if (!ds) {
        c->failed = 1;
        return;
    }
    for (size_t kvl = begin; kvl < end; kvl++) {
        const size_t b = kvl / a->KV, g = kvl % a->KV;
        const double *k = c->kr + kvl * T * D, *v = c->vh + kvl * T * D;
        double *dk = c->dkr + kvl * T * D, *dv = c->dvh + kvl * T * D;
        for (size_t hh = 0; hh < grp; hh++) {
            const size_t lane = b * a->H + g * grp + hh;
            const double *q = c->qr + lane * T * D, *pm = c->pm + lane * T * T;
            const double *dO = c->dO + lane * T * D;
            double *dq = c->dql + lane * T * D;
            for (size_t i0 = 0; i0 < T; i0 += RB) {
                const size_t i1 = T - i0 < RB ? T : i0 + RB, jlo = block_first_key(a, b, i0, i1);
                /* dPm for the reachable keys, kept in ds until the softmax VJP replaces it */
                if (jlo < i1) pd_mm_nt(i1 - i0, D, i1 - jlo, dO + i0 * D, D, v + jlo * D, D, ds + i0 * T + jlo, T, 0);
                const pd_attn_rows rows = {T, i0, i1, a->valid + b * T, a->seg_start + b * T, c->kappa};
                pd_attn_softmax_vjp_rows(&rows, pm, ds);
                /* dq[i,d] = sum over keys ascending of ds[i,j]*k[j,d] */
                if (jlo < i1) pd_mm_nn(i1 - i0, i1 - jlo, D, ds + i0 * T + jlo, T, k + jlo * D, D, dq + i0 * D, D, 0);
                else memset(dq + i0 * D, 0, (i1 - i0) * D * sizeof(double));
            }
            /* key block [j0, j1): queries before j0 never reach it (their terms are +0.0). dk and dv
             * sum over queries ascending; repeated heads add their sums in query-head order. */
            for (size_t j0 = 0; j0 < T; j0 += RB) {
                const size_t j1 = T - j0 < RB ? T : j0 + RB;
                pd_mm_tn(j1 - j0, T - j0, D, ds + j0 * T + j0, T, q + j0 * D, D, dk + j0 * D, D, hh > 0);
                pd_mm_tn(j1 - j0, T - j0, D, pm + j0 * T + j0, T, dO + j0 * D, D, dv + j0 * D, D, hh > 0);
            }
        }
    }
    pd_buf_put(ds);
}

pd_status pd_attention_backward(const pd_attn_geom *a, const pd_attn_in *in, const double *pm,
                                const double *dO, const pd_attn_grads *d, pd_error *e) {
    attn_ctx c = {0};
    c.a = a;
    c.qr = in->q;
    c.kr = in->k;
    c.vh = in->v;
    c.pm = pm;
    c.dO = dO;
    c.dql = d->q;
    c.dkr = d->k;
    c.dvh = d->v;
    c.kappa = 1.0 / sqrt((double)a->D);
    /* a key/value lane runs four products per query head: about 2*T*T*D multiply-adds each */
    const double kv_work = 2.0 * (double)a->T * (double)a->T * (double)a->D * (double)(a->H / a->KV);
    pd_parallel_for(a->B * a->KV, pd_grain(kv_work), backward_kv_lanes, &c);
    return c.failed ? pd_fail(e, PD_ERR_ALLOC, 0, 0.0, -1, -1) : PD_OK;
}
