/* SPDX-License-Identifier: MIT */
/* The all-or-nothing driver: a check pass over every tensor, then a commit pass. The element
 * arithmetic is a pure function of its operands, so the commit recomputes exactly what was checked. */
#include <stdint.h>
#include "pd_optim.h"
#include "../kernels/pool.h"

#define PD_OPTIM_GRAIN 8192

typedef struct {
    const pd_optim_tensor *t;
    const void *scalars;
    pd_optim_chunk_fn chunk;
    int commit;
    int bad; /* set by any chunk that found a non-finite result */
} apply_ctx;

static void apply_task(void *vctx, size_t begin, size_t end) {
    apply_ctx *c = vctx;
    int slot;
    double value;
    if (c->chunk(c->scalars, c->t, begin, end, c->commit, &slot, &value) != end) c->bad = 1;
}

/* The loops read and write through restrict pointers: a tensor's buffers must be disjoint. */
static int disjoint(const pd_optim_tensor *t) {
    /* addresses compared as integers: relational operators on pointers to different objects are UB */
    const uintptr_t bytes = (uintptr_t)t->param->size * sizeof(double);
    const uintptr_t b[4] = {(uintptr_t)t->param->value, (uintptr_t)t->param->grad,
                            (uintptr_t)t->slot[0], (uintptr_t)t->slot[1]};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            if (bytes && b[i] && b[j] && b[i] < b[j] + bytes && b[j] < b[i] + bytes) return 0;
    return 1;
}

pd_status pd_optim_apply(const pd_optim_tensor *t, size_t n, const void *scalars, size_t stride,
                         pd_optim_chunk_fn chunk, pd_error *e) {
    for (size_t i = 0; i < n; i++) {
        if (!t[i].param || !t[i].param->value || !t[i].param->grad || !disjoint(&t[i]))
            return pd_fail(e, PD_ERR_LAYOUT, i, 0.0, (int)i, -1);
    }
    for (size_t i = 0; i < n; i++) {
        const void *own = (const char *)scalars + i * stride;
        apply_ctx c = {&t[i], own, chunk, 0, 0};
        pd_parallel_for(t[i].param->size, PD_OPTIM_GRAIN, apply_task, &c);
        if (c.bad) { /* the first offender, as a serial scan finds it */
            int slot = 0;
            double value = 0.0;
            size_t at = chunk(own, &t[i], 0, t[i].param->size, 0, &slot, &value);
            return pd_fail(e, PD_ERR_NONFINITE, at, value, (int)i, slot);
        }
    }
    for (size_t i = 0; i < n; i++) {
        apply_ctx c = {&t[i], (const char *)scalars + i * stride, chunk, 1, 0};
        pd_parallel_for(t[i].param->size, PD_OPTIM_GRAIN, apply_task, &c);
        t[i].param->revision += 1;
    }
    return PD_OK;
}

double pd_powi(double x, uint64_t k) {
    double r = 1.0;
    while (k) {
        if (k & 1u) r = r * x;
        x = x * x;
        k >>= 1;
    }
    return r;
}
