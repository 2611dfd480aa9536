/* SPDX-License-Identifier: MIT */
/* Elementwise pieces of the block: SiLU, residual adds, the gate product and the SwiGLU VJP
 * (docs/numerics.md §5.5, §6.2). Every output depends on its own inputs only, so chunks run on
 * the pool. */
#include <math.h>
#include "swiglu.h"
#include "../kernels/pool.h"
#include "../libm/pd_libm.h"

typedef struct {
    const double *x;
    double *sg, *out;
} silu_ctx;

/* Both branches divide by 1 + exp(-|v|): the exponentials run as one array call (the
 * vectorized exp where the CPU has it; the bits of pd_exp) into sg, then a branch-free loop
 * picks the numerator (1 for v >= 0, including -0.0; exp(v) for v < 0). A NaN keeps itself as
 * the exponent's argument, so it propagates exactly as the scalar branch did. x and sg never
 * alias (separate recorded values). */
static void silu_task(void *vctx, size_t begin, size_t end) {
    const silu_ctx *c = vctx;
    const double *x = c->x;
    double *sg = c->sg, *out = c->out;
    for (size_t i = begin; i < end; i++) sg[i] = x[i] != x[i] ? x[i] : -fabs(x[i]);
    pd_exp_array(end - begin, sg + begin, sg + begin);
    for (size_t i = begin; i < end; i++) {
        const double v = x[i], t = sg[i];
        const double s = (v >= 0.0 ? 1.0 : t) / (1.0 + t);
        sg[i] = s;
        out[i] = v * s;
    }
}

void pd_silu_forward(size_t n, const double *x, double *sg, double *out) {
    silu_ctx c = {x, sg, out};
    pd_parallel_for(n, PD_EW_GRAIN, silu_task, &c);
}

typedef struct {
    const double *a, *b;
    double *out;
} pair_ctx;

static void add_task(void *vctx, size_t begin, size_t end) {
    const pair_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) c->out[i] = c->a[i] + c->b[i];
}

static void mul_task(void *vctx, size_t begin, size_t end) {
    const pair_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) c->out[i] = c->a[i] * c->b[i];
}

void pd_add_vec(size_t n, const double *a, const double *b, double *out) {
    pair_ctx c = {a, b, out};
    pd_parallel_for(n, PD_EW_GRAIN, add_task, &c);
}

void pd_mul_vec(size_t n, const double *a, const double *b, double *out) {
    pair_ctx c = {a, b, out};
    pd_parallel_for(n, PD_EW_GRAIN, mul_task, &c);
}

typedef struct {
    const double *d_pr, *up, *gs, *sg, *gl;
    double *d_gs, *d_up, *d_gl;
} swiglu_back_ctx;

static void swiglu_back_task(void *vctx, size_t begin, size_t end) {
    const swiglu_back_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) {
        const double dgs = c->d_pr[i] * c->up[i];
        const double sg = c->sg[i];
        c->d_up[i] = c->d_pr[i] * c->gs[i];
        c->d_gs[i] = dgs;
        c->d_gl[i] = dgs * (sg * (1.0 + c->gl[i] * (1.0 - sg)));
    }
}

void pd_swiglu_backward(size_t n, const double *d_pr, const pd_swiglu_saved *s, const pd_swiglu_grads *d) {
    swiglu_back_ctx c = {d_pr, s->up, s->gs, s->sg, s->gl, d->gs, d->up, d->gl};
    pd_parallel_for(n, PD_EW_GRAIN, swiglu_back_task, &c);
}
