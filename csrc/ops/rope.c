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
    size_t Hn, T, D;
    const size_t *pos;
    const double *sin_t, *cos_t, *in;
    double *out;
} rope_ctx;

/* Rows are (b, h, t) head rows; each writes only its own output row. */
static void rotate_rows(void *vctx, size_t begin, size_t end) {
    const rope_ctx *c = vctx;
    const size_t half = c->D / 2, T = c->T, D = c->D;
    for (size_t row = begin; row < end; row++) {
        const size_t p = c->pos[row / (c->Hn * T) * T + row % T];
        const double *sr = c->sin_t + p * half, *cr = c->cos_t + p * half, *a = c->in + row * D;
        double *o = c->out + row * D;
        for (size_t j = 0; j < half; j++) {
            const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];
            o[2 * j] = pd_canon(l * cs - r * s);
            o[2 * j + 1] = pd_canon(l * s + r * cs);
        }
    }
}

/* The VJP: the inverse rotation with the same table entries. */
static void unrotate_rows(void *vctx, size_t begin, size_t end) {
    const rope_ctx *c = vctx;
    const size_t half = c->D / 2, T = c->T, D = c->D;
    for (size_t row = begin; row < end; row++) {
        const size_t p = c->pos[row / (c->Hn * T) * T + row % T];
        const double *sr = c->sin_t + p * half, *cr = c->cos_t + p * half, *a = c->in + row * D;
        double *o = c->out + row * D;
        for (size_t j = 0; j < half; j++) {
            const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];
            o[2 * j] = pd_canon(l * cs + r * s);
            o[2 * j + 1] = pd_canon(r * cs - l * s);
        }
    }
}

void pd_rope_apply(size_t B, size_t Hn, size_t T, size_t D, const size_t *pos,
                   const double *sin_t, const double *cos_t, const double *in, double *out,
                   int inverse) {
    rope_ctx c = {Hn, T, D, pos, sin_t, cos_t, in, out};
    pd_parallel_for(B * Hn * T, 1 + 16384 / (D ? D : 1), inverse ? unrotate_rows : rotate_rows, &c);
}

typedef struct {
    size_t T, Hn, D;
    const double *src;
    double *dst;
} heads_ctx;

/* Token rows (b, t): head h of the row is x[(b*T+t)*Hn*D + h*D ...] = heads[((b*Hn+h)*T+t)*D ...]. */
static void split_rows(void *vctx, size_t begin, size_t end) {
    const heads_ctx *c = vctx;
    const size_t T = c->T, Hn = c->Hn, D = c->D;
    for (size_t bt = begin; bt < end; bt++)
        for (size_t h = 0; h < Hn; h++) {
            const double *xr = c->src + bt * Hn * D + h * D;
            double *hd = c->dst + ((bt / T * Hn + h) * T + bt % T) * D;
            for (size_t d = 0; d < D; d++) hd[d] = xr[d];
        }
}

static void merge_rows(void *vctx, size_t begin, size_t end) {
    const heads_ctx *c = vctx;
    const size_t T = c->T, Hn = c->Hn, D = c->D;
    for (size_t bt = begin; bt < end; bt++)
        for (size_t h = 0; h < Hn; h++) {
            const double *hd = c->src + ((bt / T * Hn + h) * T + bt % T) * D;
            double *xr = c->dst + bt * Hn * D + h * D;
            for (size_t d = 0; d < D; d++) xr[d] = hd[d];
        }
}

void pd_split_heads(size_t B, size_t T, size_t Hn, size_t D, const double *x, double *heads) {
    heads_ctx c = {T, Hn, D, x, heads};
    pd_parallel_for(B * T, 1 + 16384 / (Hn * D + 1), split_rows, &c);
}

void pd_merge_heads(size_t B, size_t T, size_t Hn, size_t D, const double *heads, double *x) {
    heads_ctx c = {T, Hn, D, heads, x};
    pd_parallel_for(B * T, 1 + 16384 / (Hn * D + 1), merge_rows, &c);
}
