/* SPDX-License-Identifier: MIT */
/* One product's operands, as every kernel entry below pd_mm_nn/nt/tn takes them. */
#ifndef PD_PRODUCT_H
#define PD_PRODUCT_H
#include <stddef.h>

struct pd_csum_s;

/* C[m,n] (+)= sum_k A(m,k) * B(k,n) with A(m,k) = A[m*rsa + k*csa], B(k,n) = B[k*rsb + n*csb]
 * and C's rows ldc apart; acc != 0 adds the finished sum to C once. bsum, when set, gets the
 * checksum terms of every B(k,n) exactly once (pd_checksum.h), taken as B is packed. */
typedef struct {
    size_t M, K, N;
    const double *A;
    size_t rsa, csa;
    const double *B;
    size_t rsb, csb;
    double *C;
    size_t ldc;
    int acc;
    struct pd_csum_s *bsum;
} pd_product;

#endif
