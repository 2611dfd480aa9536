/* SPDX-License-Identifier: MIT */
/* Micro-kernels and cache blocking of each instruction-set path (ukernel_*.c), read by gemm.c. */
#ifndef PD_UKERNEL_H
#define PD_UKERNEL_H
#include <stddef.h>
#include "panel_lines.h"
#include "product.h"

/* How a tile starts and ends, and what it asks for on the way. Each accumulator starts at +0.0
 * (load == 0) or at the partial sum already in c (load != 0); on store c = add + acc when add is
 * given (ldadd apart: the final C + s of acc mode), else c = acc. While its k loop runs the tile
 * asks for all of `next_c`'s rows (the next tile's C, when given) and `lines` of `next`'s lines,
 * together at most kc, spread over the loop (pd_line_share). */
typedef struct {
    int load;
    const double *add;
    size_t ldadd;
    pd_panel_lines *next;
    size_t lines;
    pd_tile_rows *next_c;
} pd_tile_io;

/* A tile's ends as the locals its kernel's LOAD and STORE read, and its share of the next
 * tile's C rows and the next panel's lines (`share`, over its kc terms). */
#define PD_TILE_LOCALS(io, kc)                                                                   \
    const int load = (io)->load;                                                                 \
    const double *add = (io)->add;                                                               \
    const size_t ldadd = (io)->ldadd;                                                            \
    pd_line_share share = pd_line_share_of((io)->next, (io)->lines, (io)->next_c, (kc))

/* One MR x NR output tile over kc terms of packed operands: a[k*MR + i], b[k*NR + j]; each
 * accumulator adds a*b (separately rounded) for k ascending. */
typedef void (*pd_ukernel_fn)(size_t kc, const double *a, const double *b, double *c, size_t ldc,
                              const pd_tile_io *io);

/* The same tile with A read in place from MR stored rows: a[i*lda + k] (a row-major A needs
 * no packing; the same products and sums in the same order, so the same bits). */
typedef void (*pd_ukernel_rows_fn)(size_t kc, const double *a, size_t lda, const double *b, double *c,
                                   size_t ldc, const pd_tile_io *io);

/* The path's unpacked product (gemm_small*.c): A read in place at any strides, B by contiguous
 * rows (p->csb is taken as 1). */
typedef void (*pd_small_fn)(const pd_product *p);

typedef struct {
    const char *name;
    int mr, nr;             /* register tile */
    size_t kc, mc, nc;      /* cache blocks: kc terms, mc rows (multiple of mr), nc cols */
    int lines_in_tile;      /* tiles ask for the next tile's C and their panel lines in their k loop, else just before */
    pd_ukernel_fn ukernel;
    pd_ukernel_rows_fn ukernel_rows;
    pd_small_fn small;      /* called from gemm directly: one dispatch layer less (benchmarks/KERNELS.md) */
} pd_gemm_path;

extern const pd_gemm_path pd_path_baseline;
extern const pd_gemm_path pd_path_avx2;
extern const pd_gemm_path pd_path_avx512;
extern const pd_gemm_path pd_path_neon;

#endif
