/* SPDX-License-Identifier: MIT */
/* Elementwise pieces of the block: SiLU, residual adds, the gate product and the SwiGLU VJP
 * (docs/numerics.md §5.5, §6.2). Every output depends on its own inputs only, so chunks run on
 * the pool. */
#include <math.h>
#include "swiglu.h"
#include "../kernels/isa.h"
#include "../kernels/nonfinite.h"
#include "../kernels/pool.h"
#include "../libm/pd_libm.h"

/* The element loops, in the widest vectors the products' path allows (isa.h): each element's
 * operations are the same on every path, and each loop notes (bit 63) whether any value it
 * wrote, or read where named, is not finite. */
/* the exponent's argument -|v|, a NaN kept as itself; notes x */
#define NEGABS_LOOP                                                                  \
    uint64_t any = 0;                                                                \
    for (size_t i = 0; i < n; i++) {                                                 \
        sg[i] = x[i] != x[i] ? x[i] : -fabs(x[i]);                                   \
        any |= pd_nonfinite_bit(x[i]);                                               \
    }                                                                                \
    return any
/* sg = s and out = v*s from t = exp(-|v|) in sg: the numerator is 1 for v >= 0 (-0.0 too) */
#define SIGMOID_LOOP                                                                 \
    uint64_t any = 0;                                                                \
    for (size_t i = 0; i < n; i++) {                                                 \
        const double v = x[i], t = sg[i];                                            \
        const double s = (v >= 0.0 ? 1.0 : t) / (1.0 + t);                           \
        const double o = v * s;                                                      \
        sg[i] = s;                                                                   \
        out[i] = o;                                                                  \
        any |= pd_nonfinite_bit(o);                                                  \
    }                                                                                \
    return any
/* prod = a*b; bad[0] notes b, bad[1] prod */
#define GATE_LOOP                                                                    \
    uint64_t any_b = 0, any_p = 0;                                                   \
    for (size_t i = 0; i < n; i++) {                                                 \
        const double p = a[i] * b[i];                                                \
        prod[i] = p;                                                                 \
        any_b |= pd_nonfinite_bit(b[i]);                                             \
        any_p |= pd_nonfinite_bit(p);                                                \
    }                                                                                \
    bad[0] |= any_b;                                                                 \
    bad[1] |= any_p
/* out = a + b; bad[0] notes b, bad[1] out */
#define ADD_LOOP                                                                     \
    uint64_t any_b = 0, any_o = 0;                                                   \
    for (size_t i = 0; i < n; i++) {                                                 \
        const double v = a[i] + b[i];                                                \
        out[i] = v;                                                                  \
        any_b |= pd_nonfinite_bit(b[i]);                                             \
        any_o |= pd_nonfinite_bit(v);                                                \
    }                                                                                \
    bad[0] |= any_b;                                                                 \
    bad[1] |= any_o
/* d_up = d_pr*gs, d_gl = (d_pr*up)*(sg*(1 + gl*(1 - sg))); bad: d_pr, d_up, d_gl */
#define BACK_LOOP                                                                    \
    uint64_t any_pr = 0, any_up = 0, any_gl = 0;                                     \
    for (size_t i = 0; i < n; i++) {                                                 \
        const double dgs = d_pr[i] * up[i];                                          \
        const double sg = sgv[i];                                                    \
        const double du = d_pr[i] * gs[i], dg = dgs * (sg * (1.0 + gl[i] * (1.0 - sg))); \
        d_up[i] = du;                                                                \
        d_gl[i] = dg;                                                                \
        any_pr |= pd_nonfinite_bit(d_pr[i]);                                         \
        any_up |= pd_nonfinite_bit(du);                                              \
        any_gl |= pd_nonfinite_bit(dg);                                              \
    }                                                                                \
    bad[0] |= any_pr;                                                                \
    bad[1] |= any_up;                                                                \
    bad[2] |= any_gl

typedef struct {
    uint64_t (*negabs)(size_t n, const double *x, double *sg);
    uint64_t (*sigmoid)(size_t n, const double *x, double *sg, double *out);
    void (*gate)(size_t n, const double *a, const double *b, double *prod, uint64_t bad[2]);
    void (*add)(size_t n, const double *a, const double *b, double *out, uint64_t bad[2]);
    void (*back)(size_t n, const double *d_pr, const double *up, const double *gs, const double *sgv,
                 const double *gl, double *d_up, double *d_gl, uint64_t bad[3]);
} ew_loops;

#define EW_LOOPS(suffix, target)                                                                    \
    target static uint64_t negabs##suffix(size_t n, const double *x, double *sg) { NEGABS_LOOP; }  \
    target static uint64_t sigmoid##suffix(size_t n, const double *x, double *sg, double *out) {   \
        SIGMOID_LOOP;                                                                               \
    }                                                                                               \
    target static void gate##suffix(size_t n, const double *a, const double *b, double *prod,      \
                                    uint64_t bad[2]) {                                              \
        GATE_LOOP;                                                                                  \
    }                                                                                               \
    target static void add##suffix(size_t n, const double *a, const double *b, double *out,        \
                                   uint64_t bad[2]) {                                               \
        ADD_LOOP;                                                                                   \
    }                                                                                               \
    /* restrict: seven streams need more overlap checks than the compiler versions a loop for */    \
    target static void back##suffix(size_t n, const double *restrict d_pr, const double *restrict up, \
                                    const double *restrict gs, const double *restrict sgv,          \
                                    const double *restrict gl, double *restrict d_up,               \
                                    double *restrict d_gl, uint64_t bad[3]) {                       \
        BACK_LOOP;                                                                                  \
    }                                                                                               \
    static const ew_loops loops##suffix = {negabs##suffix, sigmoid##suffix, gate##suffix, add##suffix, \
                                           back##suffix};

PD_ISA_VARIANTS(EW_LOOPS)

static const ew_loops *current_loops(void) {
    return PD_ISA_PICK(&loops_baseline, &loops_avx2, &loops_avx512, &loops_neon);
}

typedef struct {
    const double *x, *up;
    double *sg, *out, *prod;
    int bad_x, bad_out, bad_up, bad_prod; /* set by any chunk holding a non-finite one */
} silu_ctx;

/* Both branches divide by 1 + exp(-|v|): the exponentials run as one array call (the
 * vectorized exp where the CPU has it; the bits of pd_exp) into sg, then a branch-free loop
 * picks the numerator. A NaN keeps itself as the exponent's argument, so it propagates exactly
 * as the scalar branch did. x and sg never alias (separate recorded values). The gate product
 * follows on the chunk just written, and every output's finiteness is noted on the way, so no
 * value is read again to check it. */
static void silu_task(void *vctx, size_t begin, size_t end) {
    silu_ctx *c = vctx;
    const ew_loops *L = current_loops();
    const double *x = c->x + begin;
    double *sg = c->sg + begin, *out = c->out + begin;
    const size_t n = end - begin;
    if (L->negabs(n, x, sg) >> 63) c->bad_x = 1;
    pd_exp_array(n, sg, sg);
    if (L->sigmoid(n, x, sg, out) >> 63) c->bad_out = 1;
    if (!c->up) return;
    uint64_t bad[2] = {0, 0};
    L->gate(n, out, c->up + begin, c->prod + begin, bad);
    if (bad[0] >> 63) c->bad_up = 1;
    if (bad[1] >> 63) c->bad_prod = 1;
}

int pd_swiglu_forward(size_t n, const double *x, const double *up, double *sg, double *out, double *prod) {
    silu_ctx c = {x, up, sg, out, prod, 0, 0, 0, 0};
    pd_parallel_for(n, PD_EW_GRAIN, silu_task, &c);
    return (c.bad_x ? PD_BAD_GATE_LINEAR : 0) | (c.bad_out ? PD_BAD_SILU : 0) | (c.bad_up ? PD_BAD_UP : 0) |
           (c.bad_prod ? PD_BAD_PRODUCT : 0);
}

typedef struct {
    const double *a, *b;
    double *out;
    int bad_b, bad_out;
} pair_ctx;

static void add_task(void *vctx, size_t begin, size_t end) {
    pair_ctx *c = vctx;
    uint64_t bad[2] = {0, 0};
    current_loops()->add(end - begin, c->a + begin, c->b + begin, c->out + begin, bad);
    if (bad[0] >> 63) c->bad_b = 1;
    if (bad[1] >> 63) c->bad_out = 1;
}

int pd_add_vec(size_t n, const double *a, const double *b, double *out) {
    pair_ctx c = {a, b, out, 0, 0};
    pd_parallel_for(n, PD_EW_GRAIN, add_task, &c);
    return (c.bad_b ? PD_BAD_ADDEND : 0) | (c.bad_out ? PD_BAD_SUM : 0);
}

typedef struct {
    const double *d_pr, *up, *gs, *sg, *gl;
    double *d_gs, *d_up, *d_gl;
    int bad_pr, bad_gl, bad_up;
} swiglu_back_ctx;

/* d_gs is stored only when asked for (its one reader is a capture). */
static void swiglu_back_task(void *vctx, size_t begin, size_t end) {
    swiglu_back_ctx *c = vctx;
    const size_t n = end - begin;
    uint64_t bad[3] = {0, 0, 0};
    current_loops()->back(n, c->d_pr + begin, c->up + begin, c->gs + begin, c->sg + begin, c->gl + begin,
                          c->d_up + begin, c->d_gl + begin, bad);
    if (c->d_gs)
        for (size_t i = begin; i < end; i++) c->d_gs[i] = c->d_pr[i] * c->up[i];
    if (bad[0] >> 63) c->bad_pr = 1;
    if (bad[1] >> 63) c->bad_up = 1;
    if (bad[2] >> 63) c->bad_gl = 1;
}

int pd_swiglu_backward(size_t n, const double *d_pr, const pd_swiglu_saved *s, const pd_swiglu_grads *d) {
    swiglu_back_ctx c = {d_pr, s->up, s->gs, s->sg, s->gl, d->gs, d->up, d->gl, 0, 0, 0};
    pd_parallel_for(n, PD_EW_GRAIN, swiglu_back_task, &c);
    return (c.bad_pr ? PD_BAD_PRODUCT : 0) | (c.bad_gl ? PD_BAD_GATE_LINEAR : 0) | (c.bad_up ? PD_BAD_UP : 0);
}
