/* SPDX-License-Identifier: MIT */
/* Every path's register tiles (packed A and A read in place) ask for exactly the share of the
 * next panel's lines they are given, in the cursor's order, and stop where its runs end; the
 * share changes no bit of the tile. Exit status 0 only when all hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/ukernel.h"
#include "platform/pd_alloc.h"
#include "platform/pd_platform.h"
#include "variants.h"

static const pd_gemm_path *path_named(const char *name) {
    static const struct {
        const char *name;
        const pd_gemm_path *path;
    } paths[] = {
        {"baseline", &pd_path_baseline},
#if PD_ARCH_X86_64
        {"avx2", &pd_path_avx2},
        {"avx512", &pd_path_avx512},
#endif
#if PD_ARCH_AARCH64
        {"neon", &pd_path_neon},
#endif
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (!strcmp(paths[i].name, name)) return paths[i].path;
    return NULL;
}

/* kc terms, a panel of 64-byte aligned doubles; a cursor over 9 runs of 13 doubles 20 apart
 * (three lines each: 27 in all, fewer than the longest share asked for). */
#define KC 37
#define RUNS 9
#define RUN_LEN 13
#define RUN_STRIDE 20

static double *filled(size_t n, double seed) {
    double *p = pd_aligned_alloc(64, n * sizeof(double));
    if (!p) exit(2);
    for (size_t i = 0; i < n; i++) p[i] = seed + (double)((i * 7919) % 61) / 16.0 - 1.5;
    return p;
}

/* One tile of path p (rows: A read in place) asking for `lines`; 1 when its cursor ends where
 * `lines` single asks leave one and its C has the bits of the same tile asking for none. */
static int tile_holds(const pd_gemm_path *p, int rows, size_t lines, const double *src) {
    const size_t mr = (size_t)p->mr, nr = (size_t)p->nr, lda = KC + 3;
    double *a = filled(rows ? mr * lda : mr * KC, 0.25), *b = filled(KC * nr, -0.5);
    double *c0 = filled(mr * nr, 0.0), *c1 = filled(mr * nr, 0.0);
    pd_panel_lines got = {src, RUN_STRIDE, RUNS, RUN_LEN, 0, 0}, want = got;
    for (size_t n = 0; n < lines; n++) pd_panel_line(&want);
    const pd_tile_io none = {0, NULL, 0, NULL, 0}, share = {0, NULL, 0, &got, lines};
    if (rows) {
        p->ukernel_rows(KC, a, lda, b, c0, nr, &none);
        p->ukernel_rows(KC, a, lda, b, c1, nr, &share);
    } else {
        p->ukernel(KC, a, b, c0, nr, &none);
        p->ukernel(KC, a, b, c1, nr, &share);
    }
    const int ok = got.row == want.row && got.off == want.off && !memcmp(c0, c1, mr * nr * sizeof(double));
    pd_aligned_free(a);
    pd_aligned_free(b);
    pd_aligned_free(c0);
    pd_aligned_free(c1);
    return ok;
}

int main(void) {
    static const size_t shares[] = {0, 1, 5, 26, 27, KC};
    double *src = filled(RUNS * RUN_STRIDE, 1.0);
    int failed = 0, ran = 0;
    for (size_t v = 0; v < PD_VARIANT_COUNT; v++) {
        if (!pd_force_variant(v)) continue; /* not on this CPU or architecture */
        const pd_gemm_path *p = path_named(pd_variants[v].path);
        if (!p) continue;
        ran++;
        for (int rows = 0; rows < 2; rows++)
            for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++)
                if (!tile_holds(p, rows, shares[i], src)) {
                    printf("FAIL %s %s tile, share of %zu lines\n", pd_variants[v].name, rows ? "rows" : "packed",
                           shares[i]);
                    failed = 1;
                }
    }
    pd_aligned_free(src);
    printf("%s: %d paths\n", failed ? "FAILED" : "ok", ran);
    return failed || ran == 0;
}
