/* SPDX-License-Identifier: MIT */
/* The segment-causal softmax of attention's weight rows and its VJP (docs/numerics.md §5.3,
 * §6.2), a block of rows at a time (ops/attn_rows.c): the same operations per element on
 * every path. */
#ifndef PD_OPS_ATTN_ROWS_H
#define PD_OPS_ATTN_ROWS_H
#include <stddef.h>
#include <stdint.h>

/* Rows [i0, i1) of one lane's T x T weights w (row i at w + i*T). Row i allows keys
 * [s0[i], i] when valid[i] (s0 and valid indexed by row); its other entries are +0.0, and an
 * invalid row is all +0.0. */
typedef struct {
    size_t T, i0, i1;
    const uint8_t *valid;
    const size_t *s0;
    double kappa; /* 1/sqrt(D) */
} pd_attn_rows;

/* w's allowed entries hold raw scores on entry and receive the weights: s = score*kappa, the
 * shift by the row's largest s, exp, and the division by 1 + the tail (every term but the
 * first maximal one, ascending). Returns 1, or 0 with the first non-finite s in row order:
 * its index in w and value (the rows then half done). */
int pd_attn_softmax_rows(const pd_attn_rows *r, double *w, size_t *bad_at, double *bad);

/* ds (laid out like w, the adjoint of the weights on entry) = canon(w * (ds - d)) * kappa on
 * the allowed entries, d = the sum of ds[j] * w[j] ascending from +0.0; +0.0 elsewhere. */
void pd_attn_softmax_vjp_rows(const pd_attn_rows *r, const double *w, double *ds);

#endif
