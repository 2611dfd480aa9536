/* SPDX-License-Identifier: MIT */
/* Small products, unpacked (gemm_small.c) against packed (gemm.c's blocked path): the
 * measurement behind PD_SMALL_MACS. Build the core twice, once with every product packed:
 *
 *   out="$(mktemp -d)"   # from the root of a checkout
 *   cmake -S . -B "$out/pd-small" -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C "$out/pd-small" pdcore
 *   cmake -S . -B "$out/pd-packed" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-DPD_SMALL_MACS=1 \
 *     && ninja -C "$out/pd-packed" pdcore
 *   for b in small packed; do cc -O2 -Icsrc benchmarks/bench_small_gemm.c "$out/pd-$b/libpdcore.a" \
 *     -lm -lpthread -o "$out/bsg-$b" && "$out/bsg-$b" avx512; done   # or avx2, baseline
 *
 * and read the two tables side by side: fastest of 7 loops, microseconds per product, 1 thread. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kernels/gemm.h"
#include "kernels/pool.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    static const size_t shapes[][3] = {{16, 16, 16},  {16, 16, 20},  {16, 20, 16},  {16, 8, 16},   {16, 16, 8},   {16, 16, 266}, {266, 16, 16}, {16, 266, 16},
                                       {4, 4, 4},     {4, 4, 266},   {266, 4, 4},   {4, 266, 4},
                                       {32, 32, 32},  {48, 48, 48},  {64, 32, 64},  {64, 64, 64},
                                       {16, 128, 128}, {128, 16, 128}, {96, 96, 96}, {128, 128, 128}};
    if (argc > 1 && !pd_force_kernel_path(argv[1])) {
        fprintf(stderr, "kernel path %s is not available here\n", argv[1]);
        return 1;
    }
    pd_set_num_threads(1);
    printf("path %s\n%5s %5s %5s %9s %9s %9s %9s\n", pd_kernel_path(), "M", "K", "N", "MACs", "nn us",
           "nt us", "tn us");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2], big = (M > N ? M : N) * K;
        double *A = malloc(big * sizeof *A), *B = malloc(big * sizeof *B), *C = malloc(M * N * sizeof *C);
        if (!A || !B || !C) return 1;
        for (size_t i = 0; i < big; i++) { A[i] = (double)(i % 7) - 3.0; B[i] = (double)(i % 5) - 2.0; }
        const size_t reps = 2000000 / (M * K * N) + 1;
        double best[3] = {1e9, 1e9, 1e9};
        for (int r = 0; r < 7; r++)
            for (int kind = 0; kind < 3; kind++) {
                const double t0 = now();
                for (size_t q = 0; q < reps; q++) {
                    if (kind == 0) pd_mm_nn(M, K, N, A, K, B, N, C, N, 0);
                    else if (kind == 1) pd_mm_nt(M, K, N, A, K, B, K, C, N, 0);
                    else pd_mm_tn(M, K, N, A, M, B, N, C, N, 0);
                }
                const double t = (now() - t0) / (double)reps;
                if (t < best[kind]) best[kind] = t;
            }
        printf("%5zu %5zu %5zu %9zu %9.3f %9.3f %9.3f\n", M, K, N, M * K * N, best[0] * 1e6, best[1] * 1e6,
               best[2] * 1e6);
        free(A); free(B); free(C);
    }
    return 0;
}
