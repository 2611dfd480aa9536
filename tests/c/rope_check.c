/* SPDX-License-Identifier: MIT */
/* RoPE's rotations (csrc/ops/rope.c) report a non-finite value they read, on every kernel path
 * this CPU runs: an infinity or a NaN at each position of a block of head rows, forward and
 * inverse, and nothing for finite rows. The reverse pass scans a rotated-head adjoint only when
 * the rotation reported one, so a path that missed it would let the value through unnamed. */
#include <math.h>
#include <stdio.h>
#include "kernels/gemm.h"
#include "ops/rope.h"

enum { B = 2, T = 3, D = 16, H = 2, N = B * H * T * D };

/* Mismatches over every position of one bad value (and none) on the current path. */
static int check_path(void) {
    static double sn[T * D / 2], cs[T * D / 2], in[N], out[N];
    static const size_t pos[B * T] = {0, 1, 2, 0, 1, 2};
    for (int i = 0; i < T * D / 2; i++) sn[i] = 0.5, cs[i] = 0.75;
    const pd_rope r = {B, T, D, pos, sn, cs};
    int fails = 0;
    for (int at = -1; at < N; at++) {
        for (int i = 0; i < N; i++) in[i] = 1.0 + i;
        if (at >= 0) in[at] = at % 2 ? INFINITY : NAN;
        for (int inverse = 0; inverse < 2; inverse++)
            if ((pd_rope_apply(&r, H, in, out, inverse) != 0) != (at >= 0)) fails++;
    }
    return fails;
}

int main(void) {
    static const char *const paths[] = {"baseline", "avx2", "avx512", "neon"};
    int fails = 0, ran = 0;
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (!pd_force_kernel_path(paths[p])) continue;
        const int f = check_path();
        printf("%s: %d mismatches\n", paths[p], f);
        fails += f;
        ran++;
    }
    return ran > 0 && fails == 0 ? 0 : 1;
}
