/* SPDX-License-Identifier: MIT */
/* Elementwise pieces of the block: SiLU, residual adds, the gate product and the SwiGLU VJP
 * (docs/numerics.md §5.5, §6.2). Every output depends on its own inputs only, so chunks run on
 * the pool. */
#include <math.h>
#include "swiglu.h"
#include "../kernels/nonfinite.h"
#include "../kernels/pool.h"
#include "../libm/pd_libm.h"

typedef struct {
    const double *x, *up;
    double *sg, *out, *prod;
    int bad_out, bad_up, bad_prod; /* set by any chunk holding a non-finite one */
} silu_ctx;

/* Both branches divide by 1 + exp(-|v|): the exponentials run as one array call (the
 * vectorized exp where the CPU has it; the bits of pd_exp) into sg, then a branch-free loop
 * picks the numerator (1 for v >= 0, including -0.0; exp(v) for v < 0). A NaN keeps itself as
 * the exponent's argument, so it propagates exactly as the scalar branch did. x and sg never
 * alias (separate recorded values). The gate product follows on the chunk just written, and
 * every output's finiteness is noted on the way, so no value is read again to check it. */
static void silu_task(void *vctx, size_t begin, size_t end) {
    silu_ctx *c = vctx;
    const double *x = c->x, *up = c->up;
    double *sg = c->sg, *out = c->out, *prod = c->prod;
    uint64_t any_out = 0, any_up = 0, any_prod = 0;
    for (size_t i = begin; i < end; i++) sg[i] = x[i] != x[i] ? x[i] : -fabs(x[i]);
    pd_exp_array(end - begin, sg + begin, sg + begin);
    for (size_t i = begin; i < end; i++) {
        const double v = x[i], t = sg[i];
        const double s = (v >= 0.0 ? 1.0 : t) / (1.0 + t);
        const double o = v * s;
        sg[i] = s;
        out[i] = o;
        any_out |= pd_nonfinite_bit(o);
    }
    if (up)
        for (size_t i = begin; i < end; i++) {
            const double p = out[i] * up[i];
            prod[i] = p;
            any_up |= pd_nonfinite_bit(up[i]);
            any_prod |= pd_nonfinite_bit(p);
        }
    if (any_out >> 63) c->bad_out = 1;
    if (any_up >> 63) c->bad_up = 1;
    if (any_prod >> 63) c->bad_prod = 1;
}

int pd_swiglu_forward(size_t n, const double *x, const double *up, double *sg, double *out, double *prod) {
    silu_ctx c = {x, up, sg, out, prod, 0, 0, 0};
    pd_parallel_for(n, PD_EW_GRAIN, silu_task, &c);
    return (c.bad_out ? PD_BAD_SILU : 0) | (c.bad_up ? PD_BAD_UP : 0) | (c.bad_prod ? PD_BAD_PRODUCT : 0);
}

typedef struct {
    const double *a, *b;
    double *out;
    int bad;
} pair_ctx;

static void add_task(void *vctx, size_t begin, size_t end) {
    pair_ctx *c = vctx;
    uint64_t any = 0;
    for (size_t i = begin; i < end; i++) {
        const double v = c->a[i] + c->b[i];
        c->out[i] = v;
        any |= pd_nonfinite_bit(v);
    }
    if (any >> 63) c->bad = 1;
}

int pd_add_vec(size_t n, const double *a, const double *b, double *out) {
    pair_ctx c = {a, b, out, 0};
    pd_parallel_for(n, PD_EW_GRAIN, add_task, &c);
    return c.bad;
}

typedef struct {
    const double *d_pr, *up, *gs, *sg, *gl;
    double *d_gs, *d_up, *d_gl;
    int bad_pr, bad_gl, bad_up;
} swiglu_back_ctx;

/* d_gs is stored only when asked for (its one reader is a capture); d_pr, d_up and d_gl note
 * their finiteness as they are read or written. */
static void swiglu_back_task(void *vctx, size_t begin, size_t end) {
    swiglu_back_ctx *c = vctx;
    const double *d_pr = c->d_pr, *up = c->up, *gs = c->gs, *sgv = c->sg, *gl = c->gl;
    double *d_up = c->d_up, *d_gl = c->d_gl;
    uint64_t any_pr = 0, any_up = 0, any_gl = 0;
    for (size_t i = begin; i < end; i++) {
        const double dgs = d_pr[i] * up[i];
        const double sg = sgv[i];
        const double du = d_pr[i] * gs[i], dg = dgs * (sg * (1.0 + gl[i] * (1.0 - sg)));
        d_up[i] = du;
        d_gl[i] = dg;
        any_pr |= pd_nonfinite_bit(d_pr[i]);
        any_up |= pd_nonfinite_bit(du);
        any_gl |= pd_nonfinite_bit(dg);
    }
    if (c->d_gs)
        for (size_t i = begin; i < end; i++) c->d_gs[i] = d_pr[i] * up[i];
    if (any_pr >> 63) c->bad_pr = 1;
    if (any_up >> 63) c->bad_up = 1;
    if (any_gl >> 63) c->bad_gl = 1;
}

int pd_swiglu_backward(size_t n, const double *d_pr, const pd_swiglu_saved *s, const pd_swiglu_grads *d) {
    swiglu_back_ctx c = {d_pr, s->up, s->gs, s->sg, s->gl, d->gs, d->up, d->gl, 0, 0, 0};
    pd_parallel_for(n, PD_EW_GRAIN, swiglu_back_task, &c);
    return (c.bad_pr ? PD_BAD_PRODUCT : 0) | (c.bad_gl ? PD_BAD_GATE_LINEAR : 0) | (c.bad_up ? PD_BAD_UP : 0);
}
