/* SPDX-License-Identifier: MIT */
/* This CPU's peak rate of separately rounded multiply-adds (a mul then an add, no FMA), the
 * operation pydepth's matmul kernels run: 12 independent accumulators c += a*b per vector width,
 * as in the 6x2-register micro-kernels. Built and run by bench_peak.py:
 *     peak_muladd ISA THREADS SECONDS   (ISA: avx512, avx2, sse2 on x86-64; neon on aarch64)
 * prints "ISA THREADS GFLOPS" (mul and add counted as one flop each, as 2*M*N*K counts): the
 * sum over threads of each thread's fastest ~1 ms window, the rate the core delivers undisturbed. */
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ITERS 100000L /* inner loop trips between clock reads */

/* The asm barrier makes b look changed each trip, so a*b cannot be hoisted out of the loop. */
#define BODY(T, MUL, ADD, BAR)                                                              \
    for (long it = 0; it < ITERS; it++) {                                                   \
        BAR(b);                                                                             \
        c0 = ADD(c0, MUL(a0, b)); c1 = ADD(c1, MUL(a1, b)); c2 = ADD(c2, MUL(a2, b));       \
        c3 = ADD(c3, MUL(a3, b)); c4 = ADD(c4, MUL(a4, b)); c5 = ADD(c5, MUL(a5, b));       \
        c6 = ADD(c6, MUL(a6, b)); c7 = ADD(c7, MUL(a7, b)); c8 = ADD(c8, MUL(a8, b));       \
        c9 = ADD(c9, MUL(a9, b)); c10 = ADD(c10, MUL(a10, b)); c11 = ADD(c11, MUL(a11, b)); \
    }

#define KERNEL(NAME, ATTR, T, SET1, MUL, ADD, BAR, LANES)                                   \
    ATTR static double NAME(long reps) {                                                    \
        /* distinct factors and starts: no two chains may be merged by the compiler */        \
        T a0 = SET1(1.01), a1 = SET1(1.02), a2 = SET1(1.03), a3 = SET1(1.04);               \
        T a4 = SET1(1.05), a5 = SET1(1.06), a6 = SET1(1.07), a7 = SET1(1.08);               \
        T a8 = SET1(1.09), a9 = SET1(1.10), a10 = SET1(1.11), a11 = SET1(1.12);             \
        T b = SET1(1e-12);                                                                  \
        T c0 = SET1(0.1), c1 = SET1(0.2), c2 = SET1(0.3), c3 = SET1(0.4);                   \
        T c4 = SET1(0.5), c5 = SET1(0.6), c6 = SET1(0.7), c7 = SET1(0.8);                   \
        T c8 = SET1(0.9), c9 = SET1(1.0), c10 = SET1(1.1), c11 = SET1(1.2);                 \
        for (long r = 0; r < reps; r++) BODY(T, MUL, ADD, BAR)                              \
        T s = ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7)));            \
        s = ADD(s, ADD(ADD(c8, c9), ADD(c10, c11)));                                        \
        double out[LANES];                                                                  \
        memcpy(out, &s, sizeof out);                                                        \
        return out[0];                                                                      \
    }

#if defined(__x86_64__)
#define BAR_V(x) __asm__ volatile("" : "+v"(x))
#define BAR_X(x) __asm__ volatile("" : "+x"(x))
KERNEL(k_avx512, __attribute__((target("avx512f"))), __m512d, _mm512_set1_pd, _mm512_mul_pd, _mm512_add_pd, BAR_V, 8)
KERNEL(k_avx2, __attribute__((target("avx2"))), __m256d, _mm256_set1_pd, _mm256_mul_pd, _mm256_add_pd, BAR_X, 4)
KERNEL(k_sse2, __attribute__((target("sse2"))), __m128d, _mm_set1_pd, _mm_mul_pd, _mm_add_pd, BAR_X, 2)
#elif defined(__aarch64__)
/* Advanced SIMD is every aarch64's: vmulq then vaddq, as the NEON micro-kernel (never vfmaq) */
#define BAR_W(x) __asm__ volatile("" : "+w"(x))
KERNEL(k_neon, , float64x2_t, vdupq_n_f64, vmulq_f64, vaddq_f64, BAR_W, 2)
#endif

typedef struct {
    double (*fn)(long);
    double seconds, sink;
    double best; /* fastest window, seconds per trip */
} job;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void *run(void *v) {
    job *j = v;
    j->sink += j->fn(4); /* warm-up: clocks ramp, pages and caches settle */
    /* the fastest short window: on a shared machine some windows run undisturbed */
    const double t0 = now();
    double t = t0;
    j->best = 1e30;
    do {
        j->sink += j->fn(2);
        const double t1 = now();
        if ((t1 - t) / 2 < j->best) j->best = (t1 - t) / 2;
        t = t1;
    } while (t - t0 < j->seconds);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s avx512|avx2|sse2|neon THREADS SECONDS\n", argv[0]);
        return 2;
    }
    double (*fn)(long) = NULL;
    int lanes = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!strcmp(argv[1], "avx512") && __builtin_cpu_supports("avx512f")) fn = k_avx512, lanes = 8;
    if (!strcmp(argv[1], "avx2") && __builtin_cpu_supports("avx2")) fn = k_avx2, lanes = 4;
    if (!strcmp(argv[1], "sse2")) fn = k_sse2, lanes = 2;
#elif defined(__aarch64__)
    if (!strcmp(argv[1], "neon")) fn = k_neon, lanes = 2;
#endif
    const int nt = atoi(argv[2]);
    const double secs = atof(argv[3]);
    if (!fn || nt < 1 || nt > 256 || !(secs > 0)) {
        fprintf(stderr, "unsupported or bad arguments\n");
        return 2;
    }
    job jobs[256];
    pthread_t th[256];
    for (int i = 0; i < nt; i++) {
        jobs[i] = (job){fn, secs, 0.0, 0.0};
        if (pthread_create(&th[i], NULL, run, &jobs[i])) return 1;
    }
    double gflops = 0.0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        /* 12 accumulators x lanes x (mul + add) per inner trip */
        gflops += (double)ITERS * 12 * lanes * 2 / jobs[i].best * 1e-9;
    }
    printf("%s %d %.2f\n", argv[1], nt, gflops + 0.0 * jobs[0].sink);
    return 0;
}
