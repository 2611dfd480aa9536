/* SPDX-License-Identifier: MIT */
/* The product micro-kernels alone, on operands already packed and in cache: the ceiling a
 * blocked product of the same path can reach. Built and run by bench_ukernel.py, which puts
 * the machine line and whole products beside it.
 *
 *   usage: bench_ukernel PATH KC SLIVERS LDA
 *     PATH     avx512 | avx512-folded | avx2 | baseline (neon on aarch64); avx512-folded is the
 *              AVX-512 kernel with each broadcast folded into its multiply (mul_bcast_avx512.h)
 *     KC       terms per tile (the path's k-block is the usual choice)
 *     SLIVERS  row slivers run against one packed B panel (1: all in L1; 12: an A block in L2)
 *     LDA      0: packed A slivers (the kernel gemm.c runs for a packed A);
 *              else A's stored rows that far apart, read in place (the rows kernel)
 *
 * Prints GFLOP/s of the fastest of 9 loops of about 20 ms each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/gemm.h"
#include "kernels/ukernel.h"
#include "platform/pd_platform.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The AVX-512 spelling the kernels ask for: this program's, from PATH (gemm.c is not linked). */
static int g_fold;
int pd_avx512_folds(void) { return g_fold; }

static const pd_gemm_path *path_named(const char *name) {
    if (strcmp(name, "avx512-folded") == 0) {
        g_fold = 1;
        name = "avx512";
    }
    static const pd_gemm_path *const paths[] = {
#if PD_ARCH_X86_64
        &pd_path_avx512, &pd_path_avx2,
#endif
#if PD_ARCH_AARCH64
        &pd_path_neon,
#endif
        &pd_path_baseline};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(paths[i]->name, name) == 0) return paths[i];
    return NULL;
}

/* One pass: every sliver's tile against the one panel, accumulating into its own C tile. */
static void pass(const pd_gemm_path *p, size_t kc, size_t slivers, size_t lda, const double *a,
                 const double *b, double *c) {
    const size_t mr = (size_t)p->mr, nr = (size_t)p->nr;
    const pd_tile_io io = {1, NULL, 0, NULL, 0, NULL}; /* C's partial sums in, plain out, nothing asked for */
    for (size_t s = 0; s < slivers; s++) {
        double *cs = c + s * mr * nr;
        if (lda) p->ukernel_rows(kc, a + s * mr * lda, lda, b, cs, nr, &io);
        else p->ukernel(kc, a + s * mr * kc, b, cs, nr, &io);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s PATH KC SLIVERS LDA\n", argv[0]);
        return 2;
    }
    const pd_gemm_path *p = path_named(argv[1]);
    const size_t kc = strtoul(argv[2], NULL, 10), slivers = strtoul(argv[3], NULL, 10);
    const size_t lda = strtoul(argv[4], NULL, 10);
    if (!p || kc == 0 || slivers == 0 || (lda && lda < kc)) {
        fprintf(stderr, "bad arguments (path %s, kc %zu, slivers %zu, lda %zu)\n", argv[1], kc, slivers, lda);
        return 2;
    }
    const size_t mr = (size_t)p->mr, nr = (size_t)p->nr;
    const size_t a_len = lda ? slivers * mr * lda : slivers * mr * kc;
    double *a = aligned_alloc(64, (a_len * sizeof(double) + 63) / 64 * 64);
    double *b = aligned_alloc(64, (kc * nr * sizeof(double) + 63) / 64 * 64);
    double *c = aligned_alloc(64, (slivers * mr * nr * sizeof(double) + 63) / 64 * 64);
    if (!a || !b || !c) return 1;
    /* values near 1 keep every sum finite and normal over any number of loops */
    for (size_t i = 0; i < a_len; i++) a[i] = 1.0 + 1e-9 * (double)(i % 1000);
    for (size_t i = 0; i < kc * nr; i++) b[i] = 1e-12 * (double)(i % 997);
    memset(c, 0, slivers * mr * nr * sizeof(double));
    const double flops = 2.0 * (double)(kc * mr * nr * slivers);
    pass(p, kc, slivers, lda, a, b, c); /* warm the caches */
    size_t reps = 1;
    for (;; reps *= 2) { /* loops of about 20 ms */
        const double t0 = now();
        for (size_t i = 0; i < reps; i++) pass(p, kc, slivers, lda, a, b, c);
        if (now() - t0 > 0.02) break;
    }
    double best = 1e30;
    for (int r = 0; r < 9; r++) {
        const double t0 = now();
        for (size_t i = 0; i < reps; i++) pass(p, kc, slivers, lda, a, b, c);
        const double t = (now() - t0) / (double)reps;
        if (t < best) best = t;
    }
    printf("%.2f\n", flops / best * 1e-9);
    volatile double sink = c[0]; /* the results are used */
    (void)sink;
    free(a);
    free(b);
    free(c);
    return 0;
}
