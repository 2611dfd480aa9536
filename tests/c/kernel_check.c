/* SPDX-License-Identifier: MIT */
/* Every available product path (baseline, avx2, avx512, neon) at one and several threads against
 * the reference-order loops pd_mm_ref, bit for bit, on shapes with edge tiles, several
 * k-blocks, the parallel split and the unpacked small products, with tight and padded leading
 * dimensions; the _sum products also gather B's checksum terms (kernels/mix.h) by their
 * definition, each value once; a B packed once (pd_b_panels) gives every row block that reads it,
 * on its own path or another, the same bits. No Python at run time; exit status 0 only when all
 * match. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/gemm.h"
#include "variants.h"
#include "kernels/mix.h"
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

/* B's checksum terms by definition (docs/numerics-concurrency.md C5): value (k, n) at B[k*rs + n*cs],
 * keyed by its index in the buffer at B. */
static uint64_t terms(const double *B, size_t K, size_t N, size_t rs, size_t cs) {
    uint64_t sum = 0;
    for (size_t k = 0; k < K; k++)
        for (size_t n = 0; n < N; n++) {
            const size_t i = k * rs + n * cs;
            uint64_t bits;
            memcpy(&bits, &B[i], sizeof bits);
            sum += (bits ^ (uint64_t)i * 0x9E3779B97F4A7C15u) * 0xBF58476D1CE4E5B9u;
        }
    return sum;
}

/* pd_mm_nn_sum (kind 0) or pd_mm_nt_sum (1) from C0: R's bits over all cn doubles, and B's K x N
 * terms by definition, each once. */
static int sum_matches(int kind, size_t M, size_t K, size_t N, size_t pad, const double *A, const double *B,
                       const double *C0, const double *R, size_t cn, int acc) {
    const size_t ldc = N + pad;
    double *S = malloc(cn * sizeof *S);
    pd_csum sum;
    size_t at;
    pd_csum_init(&sum, B);
    memcpy(S, C0, cn * sizeof *S);
    if (kind == 0) pd_mm_nn_sum(M, K, N, A, K + pad, B, N + pad, S, ldc, acc, &sum);
    else pd_mm_nt_sum(M, K, N, A, K + pad, B, K + pad, S, ldc, acc, &sum);
    const uint64_t want = kind == 0 ? terms(B, K, N, N + pad, 1) : terms(B, K, N, 1, K + pad);
    const int ok = same_bits(S, R, cn, &at) && sum.sum == want && sum.count == K * N;
    free(S);
    return ok;
}

/* pd_mm_tn_panels over C's rows in two blocks (as the tied head's dE is made), B packed once
 * under variant `packed` and the products run under variant `run`: R's bits over all cn doubles. */
static int panels_match(size_t packed, size_t run, size_t M, size_t K, size_t N, size_t pad, const double *A,
                        const double *B, const double *C0, const double *R, size_t cn, int acc) {
    const size_t ldc = N + pad, half = M / 2;
    double *S = malloc(cn * sizeof *S);
    pd_b_panels bp;
    size_t at;
    memcpy(S, C0, cn * sizeof *S);
    pd_force_variant(packed);
    pd_b_panels_pack(&bp, K, N, B, N + pad);
    pd_force_variant(run);
    pd_mm_tn_panels(half, A, M + pad, &bp, S, ldc, acc);
    pd_mm_tn_panels(M - half, A + half, M + pad, &bp, S + half * ldc, ldc, acc);
    const int ok = bp.panels != NULL && same_bits(S, R, cn, &at);
    pd_b_panels_free(&bp);
    free(S);
    return ok;
}

int main(void) {
    /* 120 x 300: a row-major A's one tall row block (gemm.c's PD_MC_ROWS), ragged k-blocks */
    static const size_t shapes[][3] = {{7, 5, 9},     {37, 300, 41}, {130, 600, 70}, {64, 513, 200},
                                       {16, 16, 266}, {266, 16, 16}, {9, 33, 17},   {64, 64, 63},
                                       {120, 300, 40}, {9, 1100, 1030}};
    static const int threads[] = {1, 3};
    int bad = 0, runs = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        const size_t big = ((M > N ? M : N) + 3) * (K + 3); /* room for padded leading dimensions */
        double *A = malloc(big * sizeof *A), *B = malloc(big * sizeof *B);
        const size_t cn = M * (N + 3);
        double *C0 = malloc(cn * sizeof *C0), *C = malloc(cn * sizeof *C), *R = malloc(cn * sizeof *R);
        for (size_t i = 0; i < big; i++) { A[i] = next_value(); B[i] = next_value(); }
        for (size_t i = 0; i < cn; i++) C0[i] = next_value();
        for (size_t p = 0; p < PD_VARIANT_COUNT; p++) {
            if (!pd_force_variant(p)) continue; /* not on this CPU or architecture */
            for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                pd_set_num_threads(threads[t]);
                for (size_t pad = 0; pad <= 3; pad += 3)
                for (int kind = 0; kind < 3; kind++)
                    for (int acc = 0; acc < 2; acc++) {
                        /* nn: A[M,K] B[K,N]; nt: B read as [N,K]; tn: A read as [K,M]; each row
                         * of every operand (and of C) followed by pad unused elements */
                        const size_t ldc = N + pad;
                        memcpy(C, C0, cn * sizeof *C);
                        memcpy(R, C0, cn * sizeof *R);
                        if (kind == 0) {
                            pd_mm_nn(M, K, N, A, K + pad, B, N + pad, C, ldc, acc);
                            pd_mm_ref(&(pd_product){M, K, N, A, K + pad, 1, B, N + pad, 1, R, ldc, acc});
                        } else if (kind == 1) {
                            pd_mm_nt(M, K, N, A, K + pad, B, K + pad, C, ldc, acc);
                            pd_mm_ref(&(pd_product){M, K, N, A, K + pad, 1, B, 1, K + pad, R, ldc, acc});
                        } else {
                            pd_mm_tn(M, K, N, A, M + pad, B, N + pad, C, ldc, acc);
                            pd_mm_ref(&(pd_product){M, K, N, A, 1, M + pad, B, N + pad, 1, R, ldc, acc});
                        }
                        for (size_t q = 0; kind == 2 && q < PD_VARIANT_COUNT; q++) {
                            /* again with B packed once, on this path (q == p) and under the others */
                            /* packed under this path, or under avx2 or avx512-folded (odd q) */
                            if (q != p && (q + 1) % 2 != 0) continue;
                            if (!pd_force_variant(q)) continue;
                            runs++;
                            if (!panels_match(q, p, M, K, N, pad, A, B, C0, R, cn, acc)) {
                                bad++;
                                printf("FAIL %s threads %d tn_panels packed under %s acc %d pad %zu %zux%zux%zu\n",
                                       pd_variants[p].name, threads[t], pd_variants[q].name, acc, pad, M, K, N);
                            }
                        }
                        pd_force_variant(p);
                        if (kind < 2) { /* again with B's terms gathered: the same bits, each term once */
                            runs++;
                            if (!sum_matches(kind, M, K, N, pad, A, B, C0, R, cn, acc)) {
                                bad++;
                                printf("FAIL %s threads %d %s_sum acc %d pad %zu %zux%zux%zu\n",
                                       pd_variants[p].name, threads[t], kind == 0 ? "nn" : "nt", acc, pad, M, K,
                                       N);
                            }
                        }
                        size_t where;
                        runs++;
                        if (!same_bits(C, R, cn, &where)) { /* the padding must stay untouched too */
                            bad++;
                            printf("FAIL %s threads %d %s acc %d pad %zu %zux%zux%zu: element %zu %.17g != %.17g\n",
                                   pd_variants[p].name, threads[t], kind == 0 ? "nn" : kind == 1 ? "nt" : "tn",
                                   acc, pad, M, K, N, where, C[where], R[where]);
                        }
                    }
            }
            printf("ok   %-13s %zux%zux%zu\n", pd_variants[p].name, M, K, N);
        }
        free(A); free(B); free(C0); free(C); free(R);
    }
    printf("%d products, %d differing from pd_mm_ref\n", runs, bad);
    return bad ? 1 : 0;
}
