/* RoPE tables and rotations (docs/numerics.md §5.2, §6.2). */
#include <math.h>
#include "rope.h"
#include "canon.h"
#include "../kernels/isa.h"
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
 * allows (isa.h); each pair's operations are the same on every path. */
#define ROTATE_LOOP                                                                 \
    for (size_t j = 0; j < half; j++) {                                             \
        const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];         \
        o[2 * j] = pd_canon(l * cs - r * s);                                        \
        o[2 * j + 1] = pd_canon(l * s + r * cs);                                    \
    }
#define UNROTATE_LOOP                                                               \
    for (size_t j = 0; j < half; j++) {                                             \
        const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];         \
        o[2 * j] = pd_canon(l * cs + r * s);                                        \
        o[2 * j + 1] = pd_canon(r * cs - l * s);                                    \
    }

typedef struct {
    size_t Hn, T, D;
    const size_t *pos;
    const double *sin_t, *cos_t, *in;
    double *out;
} rope_ctx;

/* Rows are (b, h, t) head rows; each writes only its own output row. */
#define ROWS_LOOP(PAIRS)                                                                      \
    const rope_ctx *c = vctx;                                                                 \
    const size_t half = c->D / 2, T = c->T, D = c->D;                                         \
    for (size_t row = begin; row < end; row++) {                                              \
        const size_t p = c->pos[row / (c->Hn * T) * T + row % T];                             \
        const double *sr = c->sin_t + p * half, *cr = c->cos_t + p * half, *a = c->in + row * D; \
        double *o = c->out + row * D;                                                         \
        PAIRS                                                                                 \
    }

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

void pd_rope_apply(size_t B, size_t Hn, size_t T, size_t D, const size_t *pos,
                   const double *sin_t, const double *cos_t, const double *in, double *out,
                   int inverse) {
    rope_ctx c = {Hn, T, D, pos, sin_t, cos_t, in, out};
    pd_parallel_for(B * Hn * T, 1 + PD_EW_GRAIN / (D ? D : 1), current_task(inverse), &c);
}
