/* SPDX-License-Identifier: MIT */
/* The residual-branch multiplier (docs/numerics.md §5.9): one rounded product per element. */
#ifndef PD_OPS_BRANCH_H
#define PD_OPS_BRANCH_H
#include <stddef.h>

/* out[i] = mu * x[i], each product rounded once; out may be x. */
void pd_scale_vec(size_t n, double mu, const double *x, double *out);

#endif
