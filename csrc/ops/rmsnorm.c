#include <math.h>
#include "pd_ops.h"

pd_status pd_rmsnorm_forward(size_t R, size_t W, const double *x, const double *g, double eps,
                             const uint8_t *valid, double *m, double *z, double *r, double *n,
                             double *o, int block, int node, pd_error *e) {
    const double dw = (double)W;
    for (size_t row = 0; row < R; row++) {
        const double *xr = x + row * W;
        double *nr = n + row * W, *orow = o + row * W;
        if (valid && !valid[row]) {
            m[row] = z[row] = r[row] = 0.0;
            for (size_t w = 0; w < W; w++) nr[w] = orow[w] = 0.0;
            continue;
        }
        double s = 0.0;
        for (size_t w = 0; w < W; w++) s = s + xr[w] * xr[w];
        double ms = s / dw; /* a division by W, not a reciprocal multiply */
        double zz = ms + eps;
        if (!isfinite(ms)) return pd_fail(e, PD_ERR_NONFINITE, row, ms, block, node);
        if (zz == 0.0) return pd_fail(e, PD_ERR_ZERO_MEAN_SQUARE, row, ms, block, node);
        double lg = log(zz);
        double y = lg * -0.5;
        double rr = exp(y);
        if (!isfinite(lg) || !isfinite(rr)) return pd_fail(e, PD_ERR_NONFINITE, row, rr, block, node);
        m[row] = ms;
        z[row] = zz;
        r[row] = rr;
        for (size_t w = 0; w < W; w++) {
            double nv = xr[w] * rr;
            double ov = nv * g[w];
            if (!isfinite(ov) || !isfinite(nv))
                return pd_fail(e, PD_ERR_NONFINITE, row * W + w, ov, block, node);
            nr[w] = nv;
            orow[w] = ov;
        }
    }
    return PD_OK;
}

void pd_rmsnorm_backward(size_t R, size_t W, const double *u, const double *x, const double *g,
                         const double *z, const double *r, const double *n, const uint8_t *valid,
                         const double *res, double *out, double *dg,
                         double *cap_n, double *cap_r, double *cap_m) {
    const double dw = (double)W;
    for (size_t w = 0; w < W; w++) dg[w] = 0.0;
    for (size_t row = 0; row < R; row++) {
        const double *ur = u + row * W, *xr = x + row * W, *nr = n + row * W;
        double *outr = out + row * W;
        if (valid && !valid[row]) {
            for (size_t w = 0; w < W; w++) {
                outr[w] = res ? 0.0 + res[row * W + w] : 0.0;
                if (cap_n) cap_n[row * W + w] = 0.0;
            }
            if (cap_r) cap_r[row] = 0.0;
            if (cap_m) cap_m[row] = 0.0;
            continue;
        }
        /* gain: one flat sum over all rows, in row order */
        for (size_t w = 0; w < W; w++) dg[w] = dg[w] + ur[w] * nr[w];
        double q = 0.0;
        for (size_t w = 0; w < W; w++) q = q + (ur[w] * g[w]) * xr[w];
        const double rr = r[row];
        double u_y = q * rr;
        double u_lg = u_y * -0.5;
        double u_z = u_lg / z[row];
        double u_s = u_z / dw;
        if (cap_r) cap_r[row] = 0.0 + q;
        if (cap_m) cap_m[row] = 0.0 + u_z;
        for (size_t w = 0; w < W; w++) {
            double u_n = ur[w] * g[w];
            double c_n = u_n * rr;
            double c_s = u_s * xr[w];
            double acc = 0.0;
            if (res) acc = acc + res[row * W + w];
            acc = acc + c_n;
            acc = acc + c_s;
            acc = acc + c_s; /* MUL(x, x): two separate contributions */
            outr[w] = acc;
            if (cap_n) cap_n[row * W + w] = 0.0 + u_n;
        }
    }
}
