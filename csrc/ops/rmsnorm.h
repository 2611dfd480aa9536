/* RMSNorm forward and VJP (ops/rmsnorm.c) over rows rho = b*T + t; invalid rows are skipped
 * and left at +0.0. */
#ifndef PD_OPS_RMSNORM_H
#define PD_OPS_RMSNORM_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

/* RMSNorm: m = mean(x*x), z = m + eps, r = exp(-0.5*log z), n = x*r, o = n*g. */
pd_status pd_rmsnorm_forward(size_t R, size_t W, const double *x, const double *g, double eps,
                             const uint8_t *valid, double *m, double *z, double *r, double *n,
                             double *o, int block, int node, pd_error *e);
/* out = (((0 + res) + u*g*r) + u_s*x) + u_s*x  (res may be NULL: the final norm's input);
 * dg[w] = flat sum over rows of u*n. cap_* (may be NULL) receive adjoints of n, r and m. */
void pd_rmsnorm_backward(size_t R, size_t W, const double *u, const double *x, const double *g,
                         const double *z, const double *r, const double *n, const uint8_t *valid,
                         const double *res, double *out, double *dg,
                         double *cap_n, double *cap_r, double *cap_m);

#endif
