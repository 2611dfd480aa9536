/* SPDX-License-Identifier: MIT */
/* Reference-order product loops: every output sums its terms in ascending k from +0.0. */
#include "mm_ref.h"

void pd_mm_ref(const pd_product *p) {
    const size_t M = p->M, K = p->K, N = p->N, rsa = p->rsa, csa = p->csa, rsb = p->rsb, csb = p->csb;
    const size_t ldc = p->ldc;
    const double *A = p->A, *B = p->B;
    double *C = p->C;
    const int acc = p->acc;
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s = s + A[m * rsa + k * csa] * B[k * rsb + n * csb];
            C[m * ldc + n] = acc ? C[m * ldc + n] + s : s;
        }
}
