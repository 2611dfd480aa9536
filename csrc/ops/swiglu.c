/* Elementwise pieces of the block: SiLU, residual adds, the gate product and the SwiGLU VJP
 * (docs/numerics.md §5.5, §6.2).
 * Every output depends on its own inputs only, so chunks run on the pool. */
#include <math.h>
#include "pd_ops.h"
#include "../kernels/pool.h"

#define EW_GRAIN 16384 /* elements per chunk: below this a wake-up costs more than the loop */

typedef struct {
    int op;
    const double *a, *b, *c, *d, *e;
    double *o1, *o2, *o3;
} ew_ctx;

enum { EW_SILU, EW_ADD, EW_MUL, EW_SWIGLU_BACK };

static void ew_task(void *vctx, size_t begin, size_t end) {
    const ew_ctx *c = vctx;
    switch (c->op) {
    case EW_SILU:
        for (size_t i = begin; i < end; i++) {
            const double v = c->a[i];
            double s;
            if (v >= 0.0) { /* -0.0 takes this branch too */
                s = 1.0 / (1.0 + exp(-v));
            } else {
                const double ev = exp(v);
                s = ev / (1.0 + ev);
            }
            c->o1[i] = s;
            c->o2[i] = v * s;
        }
        break;
    case EW_ADD:
        for (size_t i = begin; i < end; i++) c->o1[i] = c->a[i] + c->b[i];
        break;
    case EW_MUL:
        for (size_t i = begin; i < end; i++) c->o1[i] = c->a[i] * c->b[i];
        break;
    case EW_SWIGLU_BACK: /* a = d_pr, b = up, c = gs, d = sg, e = gl */
        for (size_t i = begin; i < end; i++) {
            const double dgs = c->a[i] * c->b[i];
            c->o2[i] = c->a[i] * c->c[i];
            const double sg = c->d[i];
            c->o1[i] = dgs;
            c->o3[i] = dgs * (sg * (1.0 + c->e[i] * (1.0 - sg)));
        }
        break;
    }
}

void pd_silu_forward(size_t n, const double *x, double *sg, double *out) {
    ew_ctx c = {.op = EW_SILU, .a = x, .o1 = sg, .o2 = out};
    pd_parallel_for(n, EW_GRAIN, ew_task, &c);
}

void pd_add_vec(size_t n, const double *a, const double *b, double *out) {
    ew_ctx c = {.op = EW_ADD, .a = a, .b = b, .o1 = out};
    pd_parallel_for(n, EW_GRAIN, ew_task, &c);
}

void pd_mul_vec(size_t n, const double *a, const double *b, double *out) {
    ew_ctx c = {.op = EW_MUL, .a = a, .b = b, .o1 = out};
    pd_parallel_for(n, EW_GRAIN, ew_task, &c);
}

void pd_swiglu_backward(size_t n, const double *d_pr, const double *up, const double *gs,
                        const double *sg, const double *gl, double *d_gs, double *d_up,
                        double *d_gl) {
    ew_ctx c = {.op = EW_SWIGLU_BACK, .a = d_pr, .b = up, .c = gs, .d = sg, .e = gl,
                .o1 = d_gs, .o2 = d_up, .o3 = d_gl};
    pd_parallel_for(n, EW_GRAIN, ew_task, &c);
}
