/* SPDX-License-Identifier: MIT */
/* Zeroed buffers and the finiteness scan that reports the first bad index (docs/numerics.md §8). */
#include <math.h>
#include <stdlib.h>
#include "pd_tensor.h"
#include "kernels/isa.h"
#include "kernels/pool.h"
#include "platform/pd_platform.h"

double *pd_zeros(size_t n, pd_error *e) {
    size_t bytes;
    if (!pd_mul_ok(n, sizeof(double), &bytes)) {
        pd_fail(e, PD_ERR_OVERFLOW, n, 0.0, -1, -1);
        return NULL;
    }
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) pd_fail(e, PD_ERR_ALLOC, n, 0.0, -1, -1);
    return p;
}

int pd_can_allocate(size_t n) {
    size_t bytes;
    if (!pd_mul_ok(n ? n : 1, sizeof(double), &bytes)) return 0;
    void *p = malloc(bytes);
    const int ok = p != NULL;
    free(p);
    return ok;
}

/* Bit 63 of the result is set when any of x[begin, end) is not finite; the same loop in the
 * widest vectors the products' path allows. */
#define SCAN_LOOP                                                            \
    uint64_t any = 0;                                                        \
    for (size_t i = begin; i < end; i++) any |= pd_nonfinite_bit(x[i]);      \
    return any
#define SCAN(suffix, target) \
    target static uint64_t scan##suffix(const double *x, size_t begin, size_t end) { SCAN_LOOP; }
PD_ISA_VARIANTS(SCAN)

typedef struct {
    const double *x;
    uint64_t (*scan)(const double *, size_t, size_t);
    int bad;
} finite_ctx;

static void finite_task(void *vctx, size_t begin, size_t end) {
    finite_ctx *c = vctx;
    if (c->scan(c->x, begin, end) >> 63) c->bad = 1;
}

pd_status pd_check_finite(const double *x, size_t n, int block, int node, pd_error *e) {
    size_t where;
    if (pd_all_finite(x, n, &where)) return PD_OK;
    return pd_fail(e, PD_ERR_NONFINITE, where, x[where], block, node);
}

int pd_all_finite(const double *x, size_t n, size_t *where) {
    finite_ctx c = {x, PD_ISA_CURRENT(scan), 0};
    if (n <= PD_SCAN_GRAIN) finite_task(&c, 0, n); /* one chunk: no pool round trip */
    else pd_parallel_for(n, PD_SCAN_GRAIN, finite_task, &c);
    if (!c.bad) return 1;
    for (size_t i = 0; i < n; i++) { /* the first offending index, as a serial scan finds it */
        if (!isfinite(x[i])) {
            if (where) *where = i;
            return 0;
        }
    }
    return 1;
}

typedef struct {
    const double *x;
    size_t ld, cols;
    uint64_t (*scan)(const double *, size_t, size_t);
    int bad;
} block_ctx;

static void block_task(void *vctx, size_t begin, size_t end) {
    block_ctx *c = vctx;
    for (size_t r = begin; r < end; r++)
        if (c->scan(c->x + r * c->ld, 0, c->cols) >> 63) c->bad = 1;
}

int pd_block_finite(const double *x, size_t rows, size_t ld, size_t cols) {
    block_ctx c = {x, ld, cols, PD_ISA_CURRENT(scan), 0};
    const size_t grain = 1 + PD_SCAN_GRAIN / (cols ? cols : 1);
    if (rows <= grain) block_task(&c, 0, rows);
    else pd_parallel_for(rows, grain, block_task, &c);
    return !c.bad;
}
