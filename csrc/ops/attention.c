/* Segment-causal scaled dot-product attention over head lanes. Every sum runs over the
 * allowed keys only; the reference's full-range sums differ only by +-0 terms, which never
 * change a sum that starts at +0.0. */
#include <math.h>
#include <stdlib.h>
#include "pd_ops.h"
#include "../pd_kernels.h"
#include "../pd_decoder.h"

typedef struct {
    const pd_attn_geom *a;
    const double *qr, *kr, *vh, *pm, *dO;
    double *pm_out, *ho, *dql, *dkr, *dvh;
    double kappa;
    int failed;
    size_t fail_index;
    double fail_value;
} attn_ctx;

static void forward_lanes(void *vctx, size_t begin, size_t end) {
    attn_ctx *c = vctx;
    const pd_attn_geom *a = c->a;
    const size_t T = a->T, D = a->D, grp = a->H / a->KV;
    for (size_t lane = begin; lane < end; lane++) {
        const size_t b = lane / a->H, h = lane % a->H;
        const size_t kvl = b * a->KV + h / grp;
        const double *q = c->qr + lane * T * D, *k = c->kr + kvl * T * D, *v = c->vh + kvl * T * D;
        double *pm = c->pm_out + lane * T * T, *o = c->ho + lane * T * D;
        for (size_t i = 0; i < T; i++) {
            double *p = pm + i * T;
            for (size_t j = 0; j < T; j++) p[j] = 0.0;
            if (!a->valid[b * T + i]) {
                for (size_t d = 0; d < D; d++) o[i * D + d] = 0.0;
                continue;
            }
            const size_t s0 = a->seg_start[b * T + i];
            double mx = -INFINITY;
            for (size_t j = s0; j <= i; j++) {
                double s = 0.0;
                for (size_t d = 0; d < D; d++) s = s + q[i * D + d] * k[j * D + d];
                double sc = s * c->kappa; /* multiply by 1/sqrt(D), not divide */
                if (!isfinite(sc)) {
                    c->failed = 1;
                    c->fail_index = (lane * T + i) * T + j;
                    c->fail_value = sc;
                    return;
                }
                p[j] = sc;
                if (sc > mx) mx = sc;
            }
            double tail = 0.0;
            int skipped = 0;
            for (size_t j = s0; j <= i; j++) {
                double sh = p[j] - mx;
                if (sh == 0.0 && !skipped) skipped = 1; /* first maximal entry is the literal 1 */
                else tail = tail + exp(sh);
            }
            const double den = 1.0 + tail;
            for (size_t j = s0; j <= i; j++) p[j] = pd_canon(exp(p[j] - mx) / den);
            /* j outer, d inner: each o[i,d] still sums over j ascending from +0.0 */
            double *oi = o + i * D;
            for (size_t d = 0; d < D; d++) oi[d] = 0.0;
            for (size_t j = s0; j <= i; j++) {
                const double pj = p[j], *vj = v + j * D;
                for (size_t d = 0; d < D; d++) oi[d] = oi[d] + pj * vj[d];
            }
        }
    }
}

pd_status pd_attention_forward(const pd_attn_geom *a, const double *qr, const double *kr,
                               const double *vh, double *pm, double *ho, int block, pd_error *e) {
    attn_ctx c = {0};
    c.a = a;
    c.qr = qr;
    c.kr = kr;
    c.vh = vh;
    c.pm_out = pm;
    c.ho = ho;
    c.kappa = 1.0 / sqrt((double)a->D);
    pd_parallel_for(a->B * a->H, 1, forward_lanes, &c);
    if (c.failed) return pd_fail(e, PD_ERR_NONFINITE, c.fail_index, c.fail_value, block, PD_N_ATTN_SCORES);
    return PD_OK;
}

static void backward_kv_lanes(void *vctx, size_t begin, size_t end) {
    attn_ctx *c = vctx;
    const pd_attn_geom *a = c->a;
    const size_t T = a->T, D = a->D, grp = a->H / a->KV;
    double *ds = malloc((T * T + T * D * 2 + 1) * sizeof(double));
    if (!ds) {
        c->failed = 1;
        return;
    }
    double *dk_h = ds + T * T, *dv_h = dk_h + T * D;
    for (size_t kvl = begin; kvl < end; kvl++) {
        const size_t b = kvl / a->KV, g = kvl % a->KV;
        const double *k = c->kr + kvl * T * D, *v = c->vh + kvl * T * D;
        double *dk = c->dkr + kvl * T * D, *dv = c->dvh + kvl * T * D;
        for (size_t hh = 0; hh < grp; hh++) {
            const size_t lane = b * a->H + g * grp + hh;
            const double *q = c->qr + lane * T * D, *pm = c->pm + lane * T * T;
            const double *dO = c->dO + lane * T * D;
            double *dq = c->dql + lane * T * D;
            for (size_t i = 0; i < T; i++) {
                if (!a->valid[b * T + i]) {
                    for (size_t d = 0; d < D; d++) dq[i * D + d] = 0.0;
                    continue;
                }
                const size_t s0 = a->seg_start[b * T + i];
                const double *p = pm + i * T;
                double *dsr = ds + i * T;
                /* dPm for the allowed keys, kept in dsr until the softmax VJP replaces it */
                for (size_t j = s0; j <= i; j++) {
                    double s = 0.0;
                    for (size_t d = 0; d < D; d++) s = s + dO[i * D + d] * v[j * D + d];
                    dsr[j] = s;
                }
                double wsum = 0.0;
                for (size_t j = s0; j <= i; j++) wsum = wsum + dsr[j] * p[j];
                for (size_t j = s0; j <= i; j++) dsr[j] = pd_canon(p[j] * (dsr[j] - wsum)) * c->kappa;
                double *dqi = dq + i * D;
                for (size_t d = 0; d < D; d++) dqi[d] = 0.0;
                for (size_t j = s0; j <= i; j++) { /* per d still j ascending from +0.0 */
                    const double sj = dsr[j], *kj = k + j * D;
                    for (size_t d = 0; d < D; d++) dqi[d] = dqi[d] + sj * kj[d];
                }
            }
            for (size_t j = 0; j < T; j++) {
                const size_t rho = b * T + j;
                for (size_t d = 0; d < D; d++) dk_h[j * D + d] = dv_h[j * D + d] = 0.0;
                if (!a->valid[rho]) continue;
                const size_t i_end = a->seg_end[rho];
                /* i outer, d inner (rows of q and dO are contiguous); each sum keeps its order */
                double *sk = dk_h + j * D, *sv = dv_h + j * D;
                for (size_t i = j; i < i_end; i++) {
                    const double dsij = ds[i * T + j], pij = pm[i * T + j];
                    const double *qi = q + i * D, *oi = dO + i * D;
                    for (size_t d = 0; d < D; d++) {
                        sk[d] = sk[d] + qi[d] * dsij;
                        sv[d] = sv[d] + pij * oi[d];
                    }
                }
            }
            /* repeated key/value heads: contributions summed in query-head order */
            for (size_t x = 0; x < T * D; x++) {
                dk[x] = hh == 0 ? dk_h[x] : dk[x] + dk_h[x];
                dv[x] = hh == 0 ? dv_h[x] : dv[x] + dv_h[x];
            }
        }
    }
    free(ds);
}

pd_status pd_attention_backward(const pd_attn_geom *a, const double *qr, const double *kr,
                                const double *vh, const double *pm, const double *dO, double *dql,
                                double *dkr, double *dvh, pd_error *e) {
    attn_ctx c = {0};
    c.a = a;
    c.qr = qr;
    c.kr = kr;
    c.vh = vh;
    c.pm = pm;
    c.dO = dO;
    c.dql = dql;
    c.dkr = dkr;
    c.dvh = dvh;
    c.kappa = 1.0 / sqrt((double)a->D);
    pd_parallel_for(a->B * a->KV, 1, backward_kv_lanes, &c);
    return c.failed ? pd_fail(e, PD_ERR_ALLOC, 0, 0.0, -1, -1) : PD_OK;
}
