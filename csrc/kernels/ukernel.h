/* SPDX-License-Identifier: MIT */
/* Micro-kernels and cache blocking of each instruction-set path (ukernel_*.c), read by gemm.c. */
#ifndef PD_UKERNEL_H
#define PD_UKERNEL_H
#include <stddef.h>
#include "product.h"

/* One MR x NR output tile over kc terms of packed operands: a[k*MR + i], b[k*NR + j].
 * Each accumulator starts at +0.0 (load == 0) or at the partial sum already in c (load != 0),
 * then adds a*b (separately rounded) for k ascending. On store: c = add + acc when add is
 * given (the final C + s of acc mode), else c = acc. */
typedef void (*pd_ukernel_fn)(size_t kc, const double *a, const double *b, double *c,
                              size_t ldc, int load, const double *add, size_t ldadd);

/* The same tile with A read in place from MR stored rows: a[i*lda + k] (a row-major A needs
 * no packing; the same products and sums in the same order, so the same bits). */
typedef void (*pd_ukernel_rows_fn)(size_t kc, const double *a, size_t lda, const double *b, double *c,
                                   size_t ldc, int load, const double *add, size_t ldadd);

/* The path's unpacked product (gemm_small*.c): A read in place at any strides, B by contiguous
 * rows (p->csb is taken as 1). */
typedef void (*pd_small_fn)(const pd_product *p);

typedef struct {
    const char *name;
    int mr, nr;             /* register tile */
    size_t kc, mc, nc;      /* cache blocks: kc terms, mc rows (multiple of mr), nc cols */
    pd_ukernel_fn ukernel;
    pd_ukernel_rows_fn ukernel_rows;
    pd_small_fn small;      /* called from gemm directly: one dispatch layer less (benchmarks/KERNELS.md) */
} pd_gemm_path;

extern const pd_gemm_path pd_path_baseline;
extern const pd_gemm_path pd_path_avx2;
extern const pd_gemm_path pd_path_avx512;
extern const pd_gemm_path pd_path_neon;

#endif
