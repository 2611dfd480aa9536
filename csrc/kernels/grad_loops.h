/* SPDX-License-Identifier: MIT */
/* The element loops of the gradient check and commit (docs/numerics.md §6.5), in the widest
 * vectors the products' path allows (isa.h): the same additions element by element on every path. */
#ifndef PD_GRAD_LOOPS_H
#define PD_GRAD_LOOPS_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    /* g[x] = 0.0 + g[x] (a direct contribution's commit); bit 63 set when any result is not finite */
    uint64_t (*commit_direct)(double *g, size_t begin, size_t end);
    /* bit 63 set when any c[x] or g[x] + c[x] is not finite; nothing written */
    uint64_t (*check_sum)(const double *g, const double *c, size_t begin, size_t end);
    /* g[x] = g[x] + c[x] */
    void (*commit_sum)(double *g, const double *c, size_t begin, size_t end);
} pd_grad_loops;

/* The loops of the current path. */
const pd_grad_loops *pd_grad_loops_current(void);

#endif
