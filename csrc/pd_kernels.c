/* Reference-order loops; the fast paths must stay bit-identical to these. */
#include <string.h>
#include "pd_kernels.h"

static int g_threads = 1;

void pd_mm_nn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s = s + A[m * lda + k] * B[k * ldb + n];
            C[m * ldc + n] = acc ? C[m * ldc + n] + s : s;
        }
}

void pd_mm_nt(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s = s + A[m * lda + k] * B[n * ldb + k];
            C[m * ldc + n] = acc ? C[m * ldc + n] + s : s;
        }
}

void pd_mm_tn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s = s + A[k * lda + m] * B[k * ldb + n];
            C[m * ldc + n] = acc ? C[m * ldc + n] + s : s;
        }
}

void pd_set_num_threads(int n) { g_threads = n < 1 ? 1 : n; }
int pd_get_num_threads(void) { return g_threads; }
const char *pd_kernel_path(void) { return "baseline"; }
int pd_force_kernel_path(const char *name) { return strcmp(name, "baseline") == 0; }

void pd_parallel_for(size_t n, size_t grain, pd_task_fn fn, void *ctx) {
    (void)grain;
    if (n) fn(ctx, 0, n);
}
