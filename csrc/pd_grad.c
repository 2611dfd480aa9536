/* SPDX-License-Identifier: MIT */
/* Gradient writers outside the reverse pass: they own the known-zero flag of pd_grad.h. */
#include <stdint.h>
#include <string.h>
#include "pd_grad.h"
#include "kernels/pool.h"

#define PD_ZERO_GRAIN 65536 /* elements per chunk of the gradients laid end to end */

void pd_grad_zero(pd_param *p) {
    if (p->size) memset(p->grad, 0, p->size * sizeof(double));
    p->grad_zero = 1;
}

void pd_grad_set(pd_param *p, const double *src) {
    uint64_t any = 0; /* -0.0 is not +0.0: a direct write could not reproduce (-0.0) + c */
    for (size_t i = 0; i < p->size; i++) {
        uint64_t bits;
        memcpy(&bits, &src[i], sizeof bits);
        any |= bits;
    }
    if (p->size) memcpy(p->grad, src, p->size * sizeof(double));
    p->grad_zero = any == 0;
}

typedef struct {
    pd_param *const *params;
    size_t n;
} zero_ctx;

/* Elements [begin, end) of the gradients laid end to end, in declaration order. */
static void zero_task(void *vctx, size_t begin, size_t end) {
    const zero_ctx *c = vctx;
    size_t at = 0;
    for (size_t i = 0; i < c->n && at < end; at += c->params[i++]->size) {
        const size_t lo = begin > at ? begin - at : 0, size = c->params[i]->size;
        const size_t hi = end - at < size ? end - at : size;
        if (lo < hi) memset(c->params[i]->grad + lo, 0, (hi - lo) * sizeof(double));
    }
}

void pd_grads_zero(pd_param *const *params, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += params[i]->size;
    zero_ctx c = {params, n};
    /* memory-bound: split only when each thread gets whole chunks */
    if (total >= 2 * PD_ZERO_GRAIN) pd_parallel_for(total, PD_ZERO_GRAIN, zero_task, &c);
    else zero_task(&c, 0, total);
    for (size_t i = 0; i < n; i++) params[i]->grad_zero = 1;
}
