/* SPDX-License-Identifier: MIT */
/* RMSNorm forward and VJP (ops/rmsnorm.c) over rows rho = b*T + t; invalid rows are skipped
 * and left at +0.0. */
#ifndef PD_OPS_RMSNORM_H
#define PD_OPS_RMSNORM_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

/* The rows a norm runs over: R rows of W values, eps added to each mean square; a row with
 * valid[row] == 0 is skipped and left at +0.0 (valid may be NULL: every row counts). */
typedef struct {
    size_t R, W;
    double eps;
    const uint8_t *valid;
} pd_norm_geom;

/* Saved values of one RMSNorm (docs/numerics.md §5.1). */
typedef struct {
    double *mean_square;  /* m [R] */
    double *shifted;      /* z = m + eps [R] */
    double *inverse_rms;  /* r = exp(log(z) * -0.5) [R] */
    double *normalized;   /* n = x * r [R, W] */
    double *out;          /* n * gain [R, W] */
} pd_norm_rec;

/* What a norm's VJP writes: out = (((0 + res) + u*g*r) + u_s*x) + u_s*x (res may be NULL: the
 * final norm's input) and dgain[w] = flat sum over rows of u*n; the cap_* (each may be NULL)
 * receive the adjoints of n, r and m. */
typedef struct {
    const double *res;
    double *out, *dgain;
    double *cap_n, *cap_r, *cap_m;
} pd_norm_grads;

/* RMSNorm of x with gain g into rec: m = mean(x*x), z = m + eps, r = exp(-0.5*log z), n = x*r,
 * o = n*g; a non-finite or zero-mean-square row fails naming (block, node). */
pd_status pd_rmsnorm_forward(const pd_norm_geom *geom, const double *x, const double *g,
                             const pd_norm_rec *rec, int block, int node, pd_error *e);
/* The VJP of that norm at the adjoint u of its output. */
void pd_rmsnorm_backward(const pd_norm_geom *geom, const double *u, const double *x, const double *g,
                         const pd_norm_rec *rec, const pd_norm_grads *d);

#endif
