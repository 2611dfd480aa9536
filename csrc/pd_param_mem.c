/* SPDX-License-Identifier: MIT */
/* A parameter's value and gradient blocks: zeroed and starting on a 64-byte line, because the
 * products writing a gradient run slower from calloc's start, 16 bytes off a line
 * (benchmarks/KERNELS.md, "Parameters on 64-byte lines"). */
#include <stdint.h>
#include <stdlib.h>
#include "pd_param_mem.h"

#define PD_PARAM_LINE 64

/* n zeroed doubles from the first line start in a calloc'd block: calloc keeps the pages of a
 * large block untouched until written, which an aligned allocation and a memset would not. */
static double *line_zeros(size_t n, void **block) {
    const size_t pad = PD_PARAM_LINE / sizeof(double);
    *block = n <= SIZE_MAX - pad ? calloc(n + pad, sizeof(double)) : NULL;
    if (*block == NULL) return NULL;
    const uintptr_t at = ((uintptr_t)*block + PD_PARAM_LINE - 1) & ~(uintptr_t)(PD_PARAM_LINE - 1);
    return (double *)at;
}

pd_status pd_param_alloc(pd_param *p, size_t n) {
    if (n == 0) n = 1; /* a unique, writable element, as the views expect */
    p->value = line_zeros(n, &p->blocks[0]);
    p->grad = line_zeros(n, &p->blocks[1]);
    if (p->value && p->grad) return PD_OK;
    pd_param_release(p);
    return PD_ERR_ALLOC;
}

void pd_param_release(pd_param *p) {
    free(p->blocks[0]);
    free(p->blocks[1]);
    p->blocks[0] = p->blocks[1] = NULL;
    p->value = p->grad = NULL;
}
