/* SPDX-License-Identifier: MIT */
/* One product's operands, as every kernel entry below pd_mm_nn/nt/tn takes them. */
#ifndef PD_PRODUCT_H
#define PD_PRODUCT_H
#include <stddef.h>

/* C[m,n] (+)= sum_k A(m,k) * B(k,n) with A(m,k) = A[m*rsa + k*csa], B(k,n) = B[k*rsb + n*csb]
 * and C's rows ldc apart; acc != 0 adds the finished sum to C once. */
typedef struct {
    size_t M, K, N;
    const double *A;
    size_t rsa, csa;
    const double *B;
    size_t rsb, csb;
    double *C;
    size_t ldc;
    int acc;
} pd_product;

#endif
