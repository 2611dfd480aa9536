#include <math.h>
#include "pd_ops.h"

void pd_silu_forward(size_t n, const double *x, double *sg, double *out) {
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        double s;
        if (v >= 0.0) { /* -0.0 takes this branch too */
            s = 1.0 / (1.0 + exp(-v));
        } else {
            const double ev = exp(v);
            s = ev / (1.0 + ev);
        }
        sg[i] = s;
        out[i] = v * s;
    }
}
