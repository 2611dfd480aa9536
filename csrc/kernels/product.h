/* SPDX-License-Identifier: MIT */
/* One product's operands, as every kernel entry below pd_mm_nn/nt/tn takes them. */
#ifndef PD_PRODUCT_H
#define PD_PRODUCT_H
#include <stddef.h>

struct pd_csum_s;
struct pd_b_panels_s;

/* C[m,n] (+)= sum_k A(m,k) * B(k,n) with A(m,k) = A[m*rsa + k*csa], B(k,n) = B[k*rsb + n*csb]
 * and C's rows ldc apart; acc != 0 adds the finished sum to C once. bsum, when set, gets the
 * checksum terms of every B(k,n) exactly once (pd_checksum.h), taken as B is packed. bp, when
 * set, holds B already packed (gemm.h's pd_b_panels), this product's column 0 at its column
 * bp_col; never together with bsum. */
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
    const struct pd_b_panels_s *bp;
    size_t bp_col;
} pd_product;

#endif
