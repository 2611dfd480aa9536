/* SPDX-License-Identifier: MIT */
/* Every path's register tiles (packed A and A read in place) ask for all of the next tile's C
 * rows when given them, and for exactly the share of the next panel's lines they are given, in
 * the cursor's order, stopping where its runs end; neither changes a bit of the tile. Exit
 * status 0 only when all hold. */
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

/* One tile of path p (rows: A read in place) asking for `lines`, and for the rows of a next
 * tile's C when `with_c`; 1 when its cursor ends where `lines` single asks leave one, every C
 * row was asked for, and its C has the bits of the same tile asking for nothing. */
static int tile_holds(const pd_gemm_path *p, int rows, size_t lines, int with_c, const double *src) {
    const size_t mr = (size_t)p->mr, nr = (size_t)p->nr, lda = KC + 3;
    double *a = filled(rows ? mr * lda : mr * KC, 0.25), *b = filled(KC * nr, -0.5);
    double *c0 = filled(mr * nr, 0.0), *c1 = filled(mr * nr, 0.0), *next = filled(2 * mr * nr, 3.0);
    pd_panel_lines got = {src, RUN_STRIDE, RUNS, RUN_LEN, 0, 0}, want = got;
    for (size_t n = 0; n < lines; n++) pd_panel_line(&want);
    pd_tile_rows next_c = {next + 1, 2 * nr, mr, nr, 0}; /* rows that straddle two lines */
    const pd_tile_io none = {0, NULL, 0, NULL, 0, NULL},
                     share = {0, NULL, 0, &got, lines, with_c ? &next_c : NULL};
    if (rows) {
        p->ukernel_rows(KC, a, lda, b, c0, nr, &none);
        p->ukernel_rows(KC, a, lda, b, c1, nr, &share);
    } else {
        p->ukernel(KC, a, b, c0, nr, &none);
        p->ukernel(KC, a, b, c1, nr, &share);
    }
    const int ok = got.row == want.row && got.off == want.off && next_c.asked == (with_c ? 2 * mr : 0) &&
                   !memcmp(c0, c1, mr * nr * sizeof(double));
    pd_aligned_free(next);
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
            for (int with_c = 0; with_c < 2; with_c++)
                for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++) {
                    /* C's rows and the panel's lines together fill at most the loop (gemm.c) */
                    const size_t c_lines = with_c ? 2 * (size_t)p->mr : 0;
                    const size_t lines = shares[i] + c_lines > KC ? KC - c_lines : shares[i];
                    if (!tile_holds(p, rows, lines, with_c, src)) {
                        printf("FAIL %s %s tile, share of %zu lines%s\n", pd_variants[v].name,
                               rows ? "rows" : "packed", lines, with_c ? " and the next tile's C" : "");
                        failed = 1;
                    }
                }
    }
    pd_aligned_free(src);
    printf("%s: %d paths\n", failed ? "FAILED" : "ok", ran);
    return failed || ran == 0;
}
