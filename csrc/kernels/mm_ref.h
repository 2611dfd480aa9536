/* Reference-order product loops (kernels/mm_ref.c): the ground truth every fast path must
 * match bit for bit, and the path for problems too small to be worth packing. */
#ifndef PD_MM_REF_H
#define PD_MM_REF_H
#include <stddef.h>

/* C[m,n] (+)= sum_k A(m,k) * B(k,n), A(m,k) = A[m*rsa + k*csa], B(k,n) = B[k*rsb + n*csb] */
void pd_mm_ref(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
               const double *B, size_t rsb, size_t csb, double *C, size_t ldc, int acc);

#endif
