/* SPDX-License-Identifier: MIT */
/* RoPE tables and rotations (docs/numerics.md §5.2, §6.2). */
#include <math.h>
#include "rope.h"
#include "canon.h"
#include "../kernels/isa.h"
#include "../kernels/nonfinite.h"
#include "../kernels/pool.h"
#include "../libm/pd_libm.h"

pd_status pd_rope_tables(size_t P, size_t D, double base, double *sin_t, double *cos_t, pd_error *e) {
    const size_t half = D / 2;
    for (size_t j = 0; j < half; j++) {
        double ex = (-2.0 * (double)j) / (double)D; /* multiply first, then divide */
        double inv = pd_pow(base, ex);
        if (!isfinite(inv)) return pd_fail(e, PD_ERR_ROPE, j, inv, -1, -1);
        for (size_t p = 0; p < P; p++) {
            double angle = (double)p * inv;
            double s = pd_sin(angle), c = pd_cos(angle);
            if (!isfinite(angle) || !isfinite(s) || !isfinite(c))
                return pd_fail(e, PD_ERR_ROPE, p * half + j, angle, -1, -1);
            sin_t[p * half + j] = pd_canon(s);
            cos_t[p * half + j] = pd_canon(c);
        }
    }
    return PD_OK;
}

/* One head row's pairs, rotated forward (§5.2) or back (the VJP: the
 * inverse rotation with the same table entries), in the widest vectors the products' path
 * allows (isa.h); each pair's operations are the same on every path. The rows read are noted
 * for finiteness, so the value rotated needs no scan of its own. */
#define ROTATE_LOOP                                                                 \
    for (size_t j = 0; j < half; j++) {                                             \
        const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];         \
        o[2 * j] = pd_canon(l * cs - r * s);                                        \
        o[2 * j + 1] = pd_canon(l * s + r * cs);                                    \
        any |= pd_nonfinite_bit(l) | pd_nonfinite_bit(r);                           \
    }
#define UNROTATE_LOOP                                                               \
    for (size_t j = 0; j < half; j++) {                                             \
        const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];         \
        o[2 * j] = pd_canon(l * cs + r * s);                                        \
        o[2 * j + 1] = pd_canon(r * cs - l * s);                                    \
        any |= pd_nonfinite_bit(l) | pd_nonfinite_bit(r);                           \
    }

typedef struct {
    const pd_rope *r;
    size_t Hn;
    const double *in;
    double *out;
    int bad; /* some chunk read a non-finite value */
} rope_ctx;

/* Rows are (b, h, t) head rows; each writes only its own output row. */
#define ROWS_LOOP(PAIRS)                                                                      \
    rope_ctx *c = vctx;                                                                       \
    uint64_t any = 0;                                                                         \
    const size_t half = c->r->D / 2, T = c->r->T, D = c->r->D, Hn = c->Hn;                    \
    const size_t *pos = c->r->pos;                                                            \
    const double *sin_t = c->r->sin_t, *cos_t = c->r->cos_t;                                  \
    for (size_t row = begin; row < end; row++) {                                              \
        const size_t p = pos[row / (Hn * T) * T + row % T];                                   \
        const double *sr = sin_t + p * half, *cr = cos_t + p * half, *a = c->in + row * D;    \
        double *o = c->out + row * D;                                                         \
        PAIRS                                                                                 \
    }                                                                                         \
    if (any >> 63) c->bad = 1;

#define ROPE_TASKS(suffix, target)                                                                \
    target static void rotate_rows##suffix(void *vctx, size_t begin, size_t end) {               \
        ROWS_LOOP(ROTATE_LOOP)                                                                    \
    }                                                                                             \
    target static void unrotate_rows##suffix(void *vctx, size_t begin, size_t end) {             \
        ROWS_LOOP(UNROTATE_LOOP)                                                                  \
    }

PD_ISA_VARIANTS(ROPE_TASKS)

static pd_task_fn current_task(int inverse) {
    return inverse ? PD_ISA_CURRENT(unrotate_rows) : PD_ISA_CURRENT(rotate_rows);
}

int pd_rope_apply(const pd_rope *r, size_t Hn, const double *in, double *out, int inverse) {
    rope_ctx c = {r, Hn, in, out, 0};
    const size_t D = r->D;
    pd_parallel_for(r->B * Hn * r->T, 1 + PD_EW_GRAIN / (D ? D : 1), current_task(inverse), &c);
    return c.bad;
}
