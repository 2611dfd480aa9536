#include <math.h>
#include "pd_ops.h"
#include "../pd_decoder.h"

pd_status pd_nll_forward(size_t N, size_t V, const double *logits, const int64_t *tgt,
                         const uint8_t *valid, double *prob, double *per_target, double *loss,
                         size_t *count, pd_error *e) {
    size_t n = 0;
    for (size_t g = 0; g < N; g++)
        if (!valid || valid[g]) n++;
    if (n == 0) return pd_fail(e, PD_ERR_EMPTY, 0, 0.0, -1, PD_N_LOSS);
    const double dn = (double)n;
    double total = 0.0, sm = 0.0;
    int total_ok = 1;
    for (size_t g = 0; g < N; g++) {
        const double *x = logits + g * V;
        double *p = prob + g * V;
        per_target[g] = 0.0;
        if (valid && !valid[g]) {
            for (size_t c = 0; c < V; c++) p[c] = 0.0;
            continue;
        }
        double mx = -INFINITY;
        for (size_t c = 0; c < V; c++) {
            if (!isfinite(x[c])) return pd_fail(e, PD_ERR_NONFINITE, g * V + c, x[c], -1, PD_N_LOGITS);
            if (x[c] > mx) mx = x[c];
        }
        double tail = 0.0;
        int skipped = 0;
        for (size_t c = 0; c < V; c++) {
            double sh = x[c] - mx;
            if (sh == 0.0 && !skipped) skipped = 1;
            else tail = tail + exp(sh);
        }
        const double lse = log1p(tail); /* log1p of the tail, not log(1 + tail) */
        const double xt = x[tgt[g]];
        const double gap = mx - xt;
        const double lg = gap + lse;
        per_target[g] = lg;
        const double sg = isfinite(gap) ? gap / dn : mx / dn - xt / dn;
        sm = sm + (sg + lse / dn);
        if (total_ok) {
            if (!isfinite(lg)) total_ok = 0;
            else {
                total = total + lg;
                if (!isfinite(total)) total_ok = 0;
            }
        }
        const double den = 1.0 + tail;
        for (size_t c = 0; c < V; c++) p[c] = pd_canon(exp(x[c] - mx) / den);
    }
    double out = total_ok ? pd_canon(total / dn) : pd_canon(sm);
    if (!isfinite(out)) return pd_fail(e, PD_ERR_NONFINITE, 0, out, -1, PD_N_LOSS);
    *loss = out;
    *count = n;
    return PD_OK;
}

void pd_nll_backward(size_t N, size_t V, const double *prob, const int64_t *tgt,
                     const uint8_t *valid, size_t count, double *dlog) {
    const double scale = 1.0 / (double)count; /* the gradient multiplies by 1/N */
    for (size_t g = 0; g < N; g++) {
        double *d = dlog + g * V;
        const double *p = prob + g * V;
        if (valid && !valid[g]) {
            for (size_t c = 0; c < V; c++) d[c] = 0.0;
            continue;
        }
        const size_t t = (size_t)tgt[g];
        for (size_t c = 0; c < V; c++) {
            double v = p[c];
            if (c == t) v = v - 1.0;
            d[c] = pd_canon(v * scale);
        }
    }
}
