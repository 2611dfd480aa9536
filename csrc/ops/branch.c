/* SPDX-License-Identifier: MIT */
/* The residual-branch multiplier (docs/numerics.md §5.9). */
#include "ops/branch.h"

void pd_scale_vec(size_t n, double mu, const double *x, double *out) {
    for (size_t i = 0; i < n; i++) out[i] = mu * x[i];
}
