/* SPDX-License-Identifier: MIT */
/* Whole products against the static core, thread CPU time: the C harness behind KERNELS.md's
 * "What a product keeps" figures. Two builds timed in turns (say main's and a branch's):
 *
 *   out="$(mktemp -d)"   # from the root of each checkout, with its own build directory
 *   cmake -S . -B "$out/pd" -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C "$out/pd" pdcore
 *   cc -O2 -Icsrc benchmarks/bench_products.c "$out/pd/libpdcore.a" -lm -lpthread -o "$out/bp"
 *   "$out/bp" [--cold] [--offset D] [--reps R] nn 256 512 1536 nt 256 512 16384 tn 512 256 1536 ...
 *
 * Each product (kind M K N, kind one of nn nt tn) prints its GFLOP/s (2*M*K*N over the fastest
 * of R timed runs after one untimed), then the total of all of them. --cold cycles through
 * enough copies of the operands (96 MB) that each run finds them in memory, as a training step
 * finds a weight; --offset D starts every operand D doubles past a 64-byte boundary (numpy's
 * arrays and calloc's blocks start 16 bytes past one: D = 2). PYDEPTH_NUM_THREADS sets the threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/gemm.h"
#include "kernels/pool.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n doubles D past a 64-byte boundary, filled with small values of both signs */
static double *operand(size_t n, size_t d, void **raw) {
    *raw = aligned_alloc(64, ((n + d) * sizeof(double) + 63) / 64 * 64);
    if (!*raw) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    double *p = (double *)*raw + d;
    for (size_t i = 0; i < n; i++) p[i] = ((double)((i * 2654435761u) % 1000) - 500) * 1e-3;
    return p;
}

static void product(const char *kind, size_t M, size_t K, size_t N, const double *A, const double *B, double *C) {
    if (!strcmp(kind, "nn")) pd_mm_nn(M, K, N, A, K, B, N, C, N, 0);
    else if (!strcmp(kind, "nt")) pd_mm_nt(M, K, N, A, K, B, K, C, N, 0);
    else pd_mm_tn(M, K, N, A, M, B, N, C, N, 0);
}

int main(int argc, char **argv) {
    int cold = 0, reps = 5, a = 1;
    size_t off = 0;
    for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
        if (!strcmp(argv[a], "--cold")) cold = 1;
        else if (!strcmp(argv[a], "--offset") && a + 1 < argc) off = (size_t)atol(argv[++a]);
        else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[a]);
            return 2;
        }
    }
    if (getenv("PYDEPTH_NUM_THREADS")) pd_set_num_threads(atoi(getenv("PYDEPTH_NUM_THREADS")));
    double total_s = 0.0, total_f = 0.0;
    for (; a + 3 < argc; a += 4) {
        const char *kind = argv[a];
        const size_t M = (size_t)atol(argv[a + 1]), K = (size_t)atol(argv[a + 2]), N = (size_t)atol(argv[a + 3]);
        const double flops = 2.0 * (double)M * (double)K * (double)N;
        const size_t copies = cold ? 1 + (size_t)(96e6 / (8.0 * (double)(M * K + K * N + M * N))) : 1;
        double **ops = malloc(3 * copies * sizeof *ops);
        void **raw = malloc(3 * copies * sizeof *raw);
        if (!ops || !raw) return 1;
        for (size_t c = 0; c < copies; c++) {
            ops[3 * c] = operand(M * K, off, &raw[3 * c]);
            ops[3 * c + 1] = operand(K * N, off, &raw[3 * c + 1]);
            ops[3 * c + 2] = operand(M * N, off, &raw[3 * c + 2]);
        }
        /* small products loop inside one timing, so the clock's grain stays out of them */
        const int inner = cold ? 1 : (int)(2e7 / flops) + 1;
        double best = 1e30;
        size_t cur = 0;
        for (int r = 0; r <= reps; r++) {
            const double t0 = now();
            for (int i = 0; i < inner; i++, cur = (cur + 1) % copies)
                product(kind, M, K, N, ops[3 * cur], ops[3 * cur + 1], ops[3 * cur + 2]);
            const double t = (now() - t0) / inner;
            if (r > 0 && t < best) best = t;
        }
        printf("%6.1f ", flops / best * 1e-9);
        total_s += best;
        total_f += flops;
        for (size_t c = 0; c < 3 * copies; c++) free(raw[c]);
        free(ops);
        free(raw);
    }
    printf("| %6.1f\n", total_s > 0.0 ? total_f / total_s * 1e-9 : 0.0);
    return 0;
}
