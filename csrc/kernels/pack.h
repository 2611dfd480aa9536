/* SPDX-License-Identifier: MIT */
/* The packed products' copies of stored runs into panels and slivers, compiled once per path so
 * each moves the path's own vector width (pack.c); copies only, so every path packs the same bits. */
#ifndef PD_PACK_H
#define PD_PACK_H
#include <stddef.h>
#include "ukernel.h"

typedef struct {
    /* One panel from stored rows: dst[k*w + j] = src[k*ld + j] for k < kb, j < cols, zero for
     * cols <= j < w (a row-major B's panel, or a transposed A's last, partial sliver). */
    void (*rows)(size_t kb, const double *src, size_t ld, size_t cols, double *dst, int w);
    /* A transposed A's n full slivers, each stored row read once in order across all of them:
     * dst[s*kb*w + k*w + i] = src[k*ld + s*w + i] for s < n, k < kb, i < w. */
    void (*slivers)(size_t kb, const double *src, size_t ld, size_t n, double *dst, int w);
} pd_packers;

/* Path p's packers. */
const pd_packers *pd_packers_for(const pd_gemm_path *p);

#endif
