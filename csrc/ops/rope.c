/* RoPE tables and rotations, and the head split/merge relabelling (docs/numerics.md §5.2-§5.3). */
#include <math.h>
#include "pd_ops.h"
#include "../kernels/pool.h"

pd_status pd_rope_tables(size_t P, size_t D, double base, double *sin_t, double *cos_t, pd_error *e) {
    const size_t half = D / 2;
    for (size_t j = 0; j < half; j++) {
        double ex = (-2.0 * (double)j) / (double)D; /* multiply first, then divide */
        double inv = pow(base, ex);
        if (!isfinite(inv)) return pd_fail(e, PD_ERR_ROPE, j, inv, -1, -1);
        for (size_t p = 0; p < P; p++) {
            double angle = (double)p * inv;
            double s = sin(angle), c = cos(angle);
            if (!isfinite(angle) || !isfinite(s) || !isfinite(c))
                return pd_fail(e, PD_ERR_ROPE, p * half + j, angle, -1, -1);
            sin_t[p * half + j] = pd_canon(s);
            cos_t[p * half + j] = pd_canon(c);
        }
    }
    return PD_OK;
}

typedef struct {
    size_t B, Hn, T, D;
    const size_t *pos;
    const double *sin_t, *cos_t, *in;
    double *out;
    int inverse, merge;
} rows_ctx;

/* Rows are (b, h, t) head rows; each writes only its own output row. */
static void rope_rows(void *vctx, size_t begin, size_t end) {
    const rows_ctx *c = vctx;
    const size_t half = c->D / 2, T = c->T, D = c->D;
    for (size_t row = begin; row < end; row++) {
        const size_t b = row / (c->Hn * T), t = row % T;
        const size_t p = c->pos[b * T + t];
        const double *sr = c->sin_t + p * half, *cr = c->cos_t + p * half;
        const double *a = c->in + row * D;
        double *o = c->out + row * D;
        for (size_t j = 0; j < half; j++) {
            const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];
            if (!c->inverse) {
                o[2 * j] = pd_canon(l * cs - r * s);
                o[2 * j + 1] = pd_canon(l * s + r * cs);
            } else {
                o[2 * j] = pd_canon(l * cs + r * s);
                o[2 * j + 1] = pd_canon(r * cs - l * s);
            }
        }
    }
}

void pd_rope_apply(size_t B, size_t Hn, size_t T, size_t D, const size_t *pos,
                   const double *sin_t, const double *cos_t, const double *in, double *out,
                   int inverse) {
    rows_ctx c = {B, Hn, T, D, pos, sin_t, cos_t, in, out, inverse, 0};
    pd_parallel_for(B * Hn * T, 1 + 16384 / (D ? D : 1), rope_rows, &c);
}

/* Token rows (b, t): head h of the row is x[(b*T+t)*Hn*D + h*D ...] = heads[((b*Hn+h)*T+t)*D ...]. */
static void head_rows(void *vctx, size_t begin, size_t end) {
    const rows_ctx *c = vctx;
    const size_t T = c->T, Hn = c->Hn, D = c->D;
    for (size_t bt = begin; bt < end; bt++) {
        const size_t b = bt / T, t = bt % T;
        for (size_t h = 0; h < Hn; h++) {
            double *hd = (double *)(c->merge ? c->in : c->out) + ((b * Hn + h) * T + t) * D;
            double *xr = (double *)(c->merge ? c->out : c->in) + bt * Hn * D + h * D;
            if (c->merge)
                for (size_t d = 0; d < D; d++) xr[d] = hd[d];
            else
                for (size_t d = 0; d < D; d++) hd[d] = xr[d];
        }
    }
}

void pd_split_heads(size_t B, size_t T, size_t Hn, size_t D, const double *x, double *heads) {
    rows_ctx c = {B, Hn, T, D, NULL, NULL, NULL, x, heads, 0, 0};
    pd_parallel_for(B * T, 1 + 16384 / (Hn * D + 1), head_rows, &c);
}

void pd_merge_heads(size_t B, size_t T, size_t Hn, size_t D, const double *heads, double *x) {
    rows_ctx c = {B, Hn, T, D, NULL, NULL, NULL, heads, x, 0, 1};
    pd_parallel_for(B * T, 1 + 16384 / (Hn * D + 1), head_rows, &c);
}
