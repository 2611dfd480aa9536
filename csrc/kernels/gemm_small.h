/* Unpacked products for sizes where packing costs more than it saves (gemm_small*.c): every
 * output still sums its terms in ascending k from +0.0, one multiply then one add per term,
 * and acc mode adds the sum to C once at the end, so the bits equal pd_mm_ref's. */
#ifndef PD_GEMM_SMALL_H
#define PD_GEMM_SMALL_H
#include <stddef.h>
#include "ukernel.h"

/* C[m,n] (+)= sum_k A[m*rsa + k*csa] * B[k*rsb + n]: A read in place at any strides, B by
 * contiguous rows, vectorized across n. One entry per instruction-set path. */
typedef void (*pd_small_fn)(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
                            const double *B, size_t rsb, double *C, size_t ldc, int acc);
void pd_small_generic(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
                      const double *B, size_t rsb, double *C, size_t ldc, int acc);
void pd_small_avx2(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
                   const double *B, size_t rsb, double *C, size_t ldc, int acc);
void pd_small_avx512(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
                     const double *B, size_t rsb, double *C, size_t ldc, int acc);

/* The same product with B at any strides on path p: a B whose rows are not contiguous
 * (csb != 1) is first copied k-major (transpose.h) into bt, which holds K*N doubles (unused otherwise). */
void pd_mm_small(const pd_gemm_path *p, size_t M, size_t K, size_t N, const double *A, size_t rsa,
                 size_t csa, const double *B, size_t rsb, size_t csb, double *bt, double *C,
                 size_t ldc, int acc);

#endif
