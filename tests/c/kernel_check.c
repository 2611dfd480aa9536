/* Every available product path (baseline, avx2, avx512) at one and several threads against
 * the reference-order loops pd_mm_ref, bit for bit, on shapes with edge tiles, several
 * k-blocks and the parallel split. No Python at run time; exit status 0 only when all match. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/gemm.h"
#include "kernels/mm_ref.h"
#include "kernels/pool.h"

static uint64_t g_state = 0x9e3779b97f4a7c15u;
static double next_value(void) { /* xorshift64*, spread over several binades, both signs */
    g_state ^= g_state >> 12; g_state ^= g_state << 25; g_state ^= g_state >> 27;
    const uint64_t r = g_state * 0x2545f4914f6cdd1du;
    return ((double)(r >> 11) / 9007199254740992.0 - 0.5) * (double)(1u << (r & 7));
}

static int same_bits(const double *a, const double *b, size_t n, size_t *where) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(double)) != 0) { *where = i; return 0; }
    return 1;
}

int main(void) {
    static const size_t shapes[][3] = {{7, 5, 9}, {37, 300, 41}, {130, 600, 70}, {64, 513, 200}};
    static const char *const paths[] = {"baseline", "avx2", "avx512"};
    static const int threads[] = {1, 3};
    int bad = 0, runs = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        const size_t big = (M > N ? M : N) * K;
        double *A = malloc(big * sizeof *A), *B = malloc(big * sizeof *B);
        double *C0 = malloc(M * N * sizeof *C0), *C = malloc(M * N * sizeof *C), *R = malloc(M * N * sizeof *R);
        for (size_t i = 0; i < big; i++) { A[i] = next_value(); B[i] = next_value(); }
        for (size_t i = 0; i < M * N; i++) C0[i] = next_value();
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            if (!pd_force_kernel_path(paths[p])) continue; /* not on this CPU or architecture */
            for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                pd_set_num_threads(threads[t]);
                for (int kind = 0; kind < 3; kind++)
                    for (int acc = 0; acc < 2; acc++) {
                        /* nn: A[M,K] B[K,N]; nt: B read as [N,K]; tn: A read as [K,M] */
                        memcpy(C, C0, M * N * sizeof *C);
                        memcpy(R, C0, M * N * sizeof *R);
                        if (kind == 0) {
                            pd_mm_nn(M, K, N, A, K, B, N, C, N, acc);
                            pd_mm_ref(M, K, N, A, K, 1, B, N, 1, R, N, acc);
                        } else if (kind == 1) {
                            pd_mm_nt(M, K, N, A, K, B, K, C, N, acc);
                            pd_mm_ref(M, K, N, A, K, 1, B, 1, K, R, N, acc);
                        } else {
                            pd_mm_tn(M, K, N, A, M, B, N, C, N, acc);
                            pd_mm_ref(M, K, N, A, 1, M, B, N, 1, R, N, acc);
                        }
                        size_t where;
                        runs++;
                        if (!same_bits(C, R, M * N, &where)) {
                            bad++;
                            printf("FAIL %s threads %d %s acc %d %zux%zux%zu: element %zu %.17g != %.17g\n",
                                   paths[p], threads[t], kind == 0 ? "nn" : kind == 1 ? "nt" : "tn", acc,
                                   M, K, N, where, C[where], R[where]);
                        }
                    }
            }
            printf("ok   %-8s %zux%zux%zu\n", paths[p], M, K, N);
        }
        free(A); free(B); free(C0); free(C); free(R);
    }
    printf("%d products, %d differing from pd_mm_ref\n", runs, bad);
    return bad ? 1 : 0;
}
