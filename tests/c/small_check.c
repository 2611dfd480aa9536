/* SPDX-License-Identifier: MIT */
/* The unpacked small products (kernels/gemm_small*.c) at every M, N, K from 1 to 40, crossing
 * each path's tile rows, column vectors, masked edges and the transposed-B variants (the k-major
 * copy of B, and on AVX-512 the copy of A with transposed stores when M < N): nn, nt and tn,
 * acc off and on, every path the CPU has, 1 and 2 threads, against pd_mm_ref bit for bit, with
 * one unused double after every row of C that must stay untouched. Exit status 0 only when all match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/gemm.h"
#include "variants.h"
#include "kernels/mm_ref.h"
#include "kernels/pool.h"

#define DIM 40

static unsigned long long g_state = 0x2545f4914f6cdd1dull;
static double next_value(void) { /* xorshift64*, both signs, several binades, some -0.0 */
    g_state ^= g_state >> 12; g_state ^= g_state << 25; g_state ^= g_state >> 27;
    const unsigned long long r = g_state * 0x2545f4914f6cdd1dull;
    if ((r & 15) == 0) return -0.0; /* products of -0.0: every sum must still start at +0.0 */
    return ((double)(r >> 11) / 9007199254740992.0 - 0.5) * (double)(1u << (r & 7));
}

/* The product of kind (0 nn, 1 nt, 2 tn) through the public entry (ref == 0) or pd_mm_ref. */
static void product(int kind, int ref, size_t M, size_t K, size_t N, const double *A, const double *B, double *C,
                    int acc) {
    const size_t ldc = N + 1;
    if (kind == 0) {
        if (ref) pd_mm_ref(&(pd_product){M, K, N, A, K, 1, B, N, 1, C, ldc, acc, NULL});
        else pd_mm_nn(M, K, N, A, K, B, N, C, ldc, acc);
    } else if (kind == 1) {
        if (ref) pd_mm_ref(&(pd_product){M, K, N, A, K, 1, B, 1, K, C, ldc, acc, NULL});
        else pd_mm_nt(M, K, N, A, K, B, K, C, ldc, acc);
    } else {
        if (ref) pd_mm_ref(&(pd_product){M, K, N, A, 1, M, B, N, 1, C, ldc, acc, NULL});
        else pd_mm_tn(M, K, N, A, M, B, N, C, ldc, acc);
    }
}

int main(void) {
    static const char *const kinds[] = {"nn", "nt", "tn"};
    static double A[DIM * DIM], B[DIM * DIM], C0[DIM * (DIM + 1)], C[DIM * (DIM + 1)];
    static double R[2][3][DIM * (DIM + 1)]; /* pd_mm_ref's bits by acc and kind */
    for (size_t i = 0; i < DIM * DIM; i++) { A[i] = next_value(); B[i] = next_value(); }
    for (size_t i = 0; i < DIM * (DIM + 1); i++) C0[i] = next_value();
    long runs = 0, bad = 0;
    for (size_t M = 1; M <= DIM; M++)
        for (size_t K = 1; K <= DIM; K++)
            for (size_t N = 1; N <= DIM; N++) {
                const size_t cn = M * (N + 1);
                for (int acc = 0; acc < 2; acc++)
                    for (int kind = 0; kind < 3; kind++) {
                        memcpy(R[acc][kind], C0, cn * sizeof *C0);
                        product(kind, 1, M, K, N, A, B, R[acc][kind], acc);
                    }
                for (size_t p = 0; p < PD_VARIANT_COUNT; p++) {
                    if (!pd_force_variant(p)) continue; /* not on this CPU or architecture */
                    for (int threads = 1; threads <= 2; threads++) {
                        pd_set_num_threads(threads);
                        for (int acc = 0; acc < 2; acc++)
                            for (int kind = 0; kind < 3; kind++) {
                                memcpy(C, C0, cn * sizeof *C0);
                                product(kind, 0, M, K, N, A, B, C, acc);
                                runs++;
                                if (memcmp(C, R[acc][kind], cn * sizeof *C) != 0) {
                                    if (bad++ < 20)
                                        printf("FAIL %s threads %d %s acc %d %zux%zux%zu\n",
                                               pd_variants[p].name, threads, kinds[kind], acc, M, K, N);
                                }
                            }
                    }
                }
            }
    printf("%ld small products, %ld differing from pd_mm_ref\n", runs, bad);
    return bad ? 1 : 0;
}
