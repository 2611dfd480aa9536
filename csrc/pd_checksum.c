/* SPDX-License-Identifier: MIT */
/* A position-dependent checksum of parameter values: a recorded graph keeps one per parameter
 * so the reverse pass can tell when values changed behind the revision counter (a writable
 * alias such as torch.from_numpy of a read-only view). The terms are kernels/mix.c's. */
#include "pd_checksum.h"
#include "pd_decoder.h"
#include "kernels/pool.h"
#include "platform/pd_atomic.h"

#define PD_CHECKSUM_GRAIN 65536 /* elements per chunk */

/* A 32-bit size_t keeps both halves: a flipped high bit of a value changes only the high half. */
static size_t fold(uint64_t s) {
#if SIZE_MAX < UINT64_MAX
    return (size_t)(s ^ (s >> 32));
#else
    return (size_t)s;
#endif
}

size_t pd_csum_result(const pd_csum *s, size_t n) {
    return s->count == n ? fold(s->sum) : pd_values_checksum(s->base, n);
}

/* ---- whole buffers ------------------------------------------------------------------- */

typedef struct {
    const double *x;
    pd_atomic_size sum_total;
} sum_ctx;

static void sum_task(void *vctx, size_t begin, size_t end) {
    sum_ctx *c = vctx;
    /* addition commutes: any chunking gives one sum */
    pd_atomic_size_fetch_add(&c->sum_total, (size_t)pd_mix_range(c->x, begin, end));
}

size_t pd_values_checksum(const double *x, size_t n) {
    sum_ctx c;
    c.x = x;
    pd_atomic_size_store(&c.sum_total, 0);
    /* one chunk: no pool round trip; a 32-bit size_t could not carry the partial sums */
    if (n <= PD_CHECKSUM_GRAIN || SIZE_MAX < UINT64_MAX) return fold(pd_mix_range(x, 0, n));
    pd_parallel_for(n, PD_CHECKSUM_GRAIN, sum_task, &c);
    return pd_atomic_size_fetch_add(&c.sum_total, 0);
}

typedef struct {
    pd_param *const *params;
    size_t *out;
} params_ctx;

static void params_task(void *vctx, size_t begin, size_t end) {
    params_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) c->out[i] = pd_values_checksum(c->params[i]->value, c->params[i]->size);
}

void pd_params_checksums(pd_param *const *params, size_t n, size_t *out) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += params[i]->size;
    params_ctx c = {params, out};
    /* one parameter per chunk above two chunks' worth of elements, else one inline pass */
    pd_parallel_for(n, total >= 2 * PD_CHECKSUM_GRAIN ? 1 : n, params_task, &c);
}
