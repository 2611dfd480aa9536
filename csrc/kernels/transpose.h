/* SPDX-License-Identifier: MIT */
/* Transposes of a stored-row operand into k-major order (transpose*.c), the one owner of the
 * register block transposes: the unpacked products' whole copy and the packed panels' gather. */
#ifndef PD_TRANSPOSE_H
#define PD_TRANSPOSE_H
#include <stddef.h>
#include "ukernel.h"

/* bt[k*N + n] = B[n*ldb + k] (a transposed B made k-major); the vector paths move full blocks
 * in registers, AVX-512 its edge blocks too (masked), AVX2 leaves the k >= k0 columns and
 * n >= n0 rows to pd_transpose_edges. */
typedef void (*pd_transpose_fn)(size_t K, size_t N, const double *B, size_t ldb, double *bt);
void pd_transpose_generic(size_t K, size_t N, const double *B, size_t ldb, double *bt);
void pd_transpose_avx2(size_t K, size_t N, const double *B, size_t ldb, double *bt);
void pd_transpose_avx512(size_t K, size_t N, const double *B, size_t ldb, double *bt);
void pd_transpose_edges(size_t K, size_t N, const double *B, size_t ldb, double *bt, size_t k0, size_t n0);

/* One packed panel: dst[k*w + l] = src[l*ld + k] for k < kb, l < lanes, zero for lanes..w-1
 * (lanes are stored rows contiguous in k: an A sliver, or the panel of a transposed B). The
 * vector paths transpose full-width panels in blocks and hand partial ones to the generic. */
typedef void (*pd_gather_fn)(size_t kb, const double *src, size_t ld, size_t lanes, double *dst, int w);
void pd_gather_generic(size_t kb, const double *src, size_t ld, size_t lanes, double *dst, int w);
void pd_gather_avx2(size_t kb, const double *src, size_t ld, size_t lanes, double *dst, int w);
void pd_gather_avx512(size_t kb, const double *src, size_t ld, size_t lanes, double *dst, int w);

/* Path p's variants (copies only: every path gives the same bits). */
pd_transpose_fn pd_transpose_for(const pd_gemm_path *p);
pd_gather_fn pd_gather_for(const pd_gemm_path *p);

#endif
