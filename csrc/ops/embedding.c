/* SPDX-License-Identifier: MIT */
/* Token lookup and its scatter-add VJP (docs/numerics.md §5.6, §6.2). */
#include "embedding.h"

void pd_embedding_forward(size_t N, size_t W, const double *E, const int64_t *ids,
                          const uint8_t *valid, double *x) {
    for (size_t p = 0; p < N; p++) {
        double *xr = x + p * W;
        if (valid && !valid[p]) { /* padding is never looked up */
            for (size_t w = 0; w < W; w++) xr[w] = 0.0;
            continue;
        }
        const double *er = E + (size_t)ids[p] * W;
        for (size_t w = 0; w < W; w++) xr[w] = er[w];
    }
}

void pd_embedding_backward(size_t N, size_t W, const double *u, const int64_t *ids,
                           const uint8_t *valid, double *dE) {
    for (size_t p = 0; p < N; p++) {
        if (valid && !valid[p]) continue;
        double *dr = dE + (size_t)ids[p] * W;
        for (size_t w = 0; w < W; w++) dr[w] = dr[w] + u[p * W + w];
    }
}
