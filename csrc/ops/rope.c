#include <math.h>
#include "pd_ops.h"

pd_status pd_rope_tables(size_t P, size_t D, double base, double *sin_t, double *cos_t, pd_error *e) {
    const size_t half = D / 2;
    for (size_t j = 0; j < half; j++) {
        double ex = (-2.0 * (double)j) / (double)D; /* multiply first, then divide */
        double inv = pow(base, ex);
        if (!isfinite(inv)) return pd_fail(e, PD_ERR_ROPE, j, inv, -1, -1);
        for (size_t p = 0; p < P; p++) {
            double angle = (double)p * inv;
            double s = sin(angle), c = cos(angle);
            if (!isfinite(angle) || !isfinite(s) || !isfinite(c))
                return pd_fail(e, PD_ERR_ROPE, p * half + j, angle, -1, -1);
            sin_t[p * half + j] = pd_canon(s);
            cos_t[p * half + j] = pd_canon(c);
        }
    }
    return PD_OK;
}

void pd_rope_apply(size_t B, size_t Hn, size_t T, size_t D, const size_t *pos,
                   const double *sin_t, const double *cos_t, const double *in, double *out,
                   int inverse) {
    const size_t half = D / 2;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < Hn; h++)
            for (size_t t = 0; t < T; t++) {
                const size_t p = pos[b * T + t];
                const double *sr = sin_t + p * half, *cr = cos_t + p * half;
                const double *a = in + ((b * Hn + h) * T + t) * D;
                double *o = out + ((b * Hn + h) * T + t) * D;
                for (size_t j = 0; j < half; j++) {
                    const double l = a[2 * j], r = a[2 * j + 1], c = cr[j], s = sr[j];
                    if (!inverse) {
                        o[2 * j] = pd_canon(l * c - r * s);
                        o[2 * j + 1] = pd_canon(l * s + r * c);
                    } else {
                        o[2 * j] = pd_canon(l * c + r * s);
                        o[2 * j + 1] = pd_canon(r * c - l * s);
                    }
                }
            }
}

void pd_split_heads(size_t B, size_t T, size_t Hn, size_t D, const double *x, double *heads) {
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < Hn; h++)
                for (size_t d = 0; d < D; d++)
                    heads[((b * Hn + h) * T + t) * D + d] = x[(b * T + t) * Hn * D + h * D + d];
}

void pd_merge_heads(size_t B, size_t T, size_t Hn, size_t D, const double *heads, double *x) {
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < Hn; h++)
                for (size_t d = 0; d < D; d++)
                    x[(b * T + t) * Hn * D + h * D + d] = heads[((b * Hn + h) * T + t) * D + d];
}
