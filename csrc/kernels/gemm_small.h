/* SPDX-License-Identifier: MIT */
/* Unpacked products for sizes where packing costs more than it saves (gemm_small*.c): every
 * output still sums its terms in ascending k from +0.0, one multiply then one add per term,
 * and acc mode adds the sum to C once at the end, so the bits equal pd_mm_ref's. */
#ifndef PD_GEMM_SMALL_H
#define PD_GEMM_SMALL_H
#include <stddef.h>
#include "product.h"
#include "ukernel.h"

/* The product with A read in place at any strides and B by contiguous rows (p->csb is taken
 * as 1), vectorized across n: each path's pd_gemm_path.small (ukernel.h). */
void pd_small_generic(const pd_product *p);
void pd_small_avx2(const pd_product *p);
void pd_small_avx512(const pd_product *p);

/* The same product stored transposed, C[n*ldc + m] (+)= sum_k A(m,k) B(k,n): a transposed
 * B's product computed as (A Bᵀ)ᵀ = B Aᵀ with A copied k-major instead of B (AVX-512 only). */
void pd_small_avx512_ct(const pd_product *p);

/* The same product with B at any strides on path: a B whose rows are not contiguous
 * (csb != 1) is first copied k-major (transpose.h) into bt, which holds K*N doubles (unused
 * otherwise); on AVX-512 a row-major A with M < N is copied instead (K*M doubles). */
void pd_mm_small(const pd_gemm_path *path, const pd_product *p, double *bt);

#endif
