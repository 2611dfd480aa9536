/* Reference-order product loops: the ground truth every fast path must match bit for bit,
 * and the path for problems too small to be worth packing. */
#include "pd_kernels.h"
#include "kernels/pd_gemm.h"

/* C[m,n] (+)= sum_k A(m,k) * B(k,n), A(m,k) = A[m*rsa + k*csa], B(k,n) = B[k*rsb + n*csb] */
void pd_mm_ref(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
               const double *B, size_t rsb, size_t csb, double *C, size_t ldc, int acc) {
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s = s + A[m * rsa + k * csa] * B[k * rsb + n * csb];
            C[m * ldc + n] = acc ? C[m * ldc + n] + s : s;
        }
}
