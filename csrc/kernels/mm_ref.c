/* Reference-order product loops: every output sums its terms in ascending k from +0.0. */
#include "mm_ref.h"

void pd_mm_ref(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
               const double *B, size_t rsb, size_t csb, double *C, size_t ldc, int acc) {
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s = s + A[m * rsa + k * csa] * B[k * rsb + n * csb];
            C[m * ldc + n] = acc ? C[m * ldc + n] + s : s;
        }
}
