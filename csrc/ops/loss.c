/* Valid-target mean NLL from the logits and its VJP (docs/numerics.md §5.7, §6.2). */
#include <math.h>
#include <stdlib.h>
#include "loss.h"
#include "canon.h"
#include "../pd_nodes.h"
#include "../kernels/pool.h"
#include "../libm/pd_libm.h"

typedef struct {
    size_t V;
    const double *logits;
    const int64_t *tgt;
    const uint8_t *valid;
    double *prob, *per_target, *sm_term, dn;
    uint8_t *bad; /* rows holding a non-finite logit */
} nll_ctx;

/* Rows are independent; the cross-row sums stay sequential in the caller. */
static void nll_rows(void *vctx, size_t begin, size_t end) {
    nll_ctx *c = vctx;
    const size_t V = c->V;
    const double dn = c->dn;
    for (size_t g = begin; g < end; g++) {
        const double *x = c->logits + g * V;
        double *p = c->prob + g * V;
        c->per_target[g] = 0.0;
        c->sm_term[g] = 0.0;
        c->bad[g] = 0;
        if (c->valid && !c->valid[g]) {
            for (size_t cl = 0; cl < V; cl++) p[cl] = 0.0;
            continue;
        }
        double mx = -INFINITY;
        int ok = 1;
        for (size_t cl = 0; cl < V; cl++) {
            ok &= isfinite(x[cl]) != 0;
            if (x[cl] > mx) mx = x[cl];
        }
        if (!ok) {
            c->bad[g] = 1;
            continue;
        }
        size_t first_max = V; /* the first zero shift: its exp, the literal 1, stays out of tail */
        for (size_t cl = 0; cl < V; cl++) {
            p[cl] = x[cl] - mx;
            if (p[cl] == 0.0 && first_max == V) first_max = cl;
        }
        pd_exp_array(V, p, p); /* the same exp(x - mx) the probability divides */
        double tail = 0.0;
        for (size_t cl = 0; cl < V; cl++)
            if (cl != first_max) tail = tail + p[cl];
        const double lse = pd_log1p(tail); /* log1p of the tail, not log(1 + tail) */
        const double xt = x[c->tgt[g]];
        const double gap = mx - xt;
        c->per_target[g] = gap + lse;
        const double sg = isfinite(gap) ? gap / dn : mx / dn - xt / dn;
        c->sm_term[g] = sg + lse / dn;
        const double den = 1.0 + tail;
        for (size_t cl = 0; cl < V; cl++) p[cl] = pd_canon(p[cl] / den);
    }
}

pd_status pd_nll_forward(size_t N, size_t V, const double *logits, const int64_t *tgt,
                         const uint8_t *valid, double *prob, double *per_target, double *loss,
                         size_t *count, pd_error *e) {
    size_t n = 0;
    for (size_t g = 0; g < N; g++)
        if (!valid || valid[g]) n++;
    if (n == 0) return pd_fail(e, PD_ERR_EMPTY, 0, 0.0, -1, PD_N_LOSS);
    double *sm_term = malloc(N * sizeof(double));
    uint8_t *bad = malloc(N);
    if (!sm_term || !bad) {
        free(sm_term);
        free(bad);
        return pd_fail(e, PD_ERR_ALLOC, 0, 0.0, -1, PD_N_LOSS);
    }
    nll_ctx c = {V, logits, tgt, valid, prob, per_target, sm_term, (double)n, bad};
    pd_parallel_for(N, 1 + 16384 / (V ? V : 1), nll_rows, &c);
    double total = 0.0, sm = 0.0;
    int total_ok = 1;
    for (size_t g = 0; g < N; g++) {
        if (valid && !valid[g]) continue;
        if (bad[g]) { /* the first non-finite logit in row order */
            size_t cl = 0;
            while (isfinite(logits[g * V + cl])) cl++;
            const double v = logits[g * V + cl];
            free(sm_term);
            free(bad);
            return pd_fail(e, PD_ERR_NONFINITE, g * V + cl, v, -1, PD_N_LOGITS);
        }
        const double lg = per_target[g];
        sm = sm + sm_term[g];
        if (total_ok) {
            if (!isfinite(lg)) total_ok = 0;
            else {
                total = total + lg;
                if (!isfinite(total)) total_ok = 0;
            }
        }
    }
    free(sm_term);
    free(bad);
    double out = total_ok ? pd_canon(total / (double)n) : pd_canon(sm);
    if (!isfinite(out)) return pd_fail(e, PD_ERR_NONFINITE, 0, out, -1, PD_N_LOSS);
    *loss = out;
    *count = n;
    return PD_OK;
}

typedef struct {
    size_t V;
    const double *prob;
    const int64_t *tgt;
    const uint8_t *valid;
    double scale, *dlog;
} nll_back_ctx;

static void nll_back_rows(void *vctx, size_t begin, size_t end) {
    nll_back_ctx *c = vctx;
    const size_t V = c->V;
    for (size_t g = begin; g < end; g++) {
        double *d = c->dlog + g * V;
        const double *p = c->prob + g * V;
        if (c->valid && !c->valid[g]) {
            for (size_t cl = 0; cl < V; cl++) d[cl] = 0.0;
            continue;
        }
        const size_t t = (size_t)c->tgt[g]; /* the subtraction happens only at the target */
        const double pt = p[t];              /* read first: dlog may overwrite prob in place */
        for (size_t cl = 0; cl < V; cl++) d[cl] = pd_canon(p[cl] * c->scale);
        d[t] = pd_canon((pt - 1.0) * c->scale);
    }
}

void pd_nll_backward(size_t N, size_t V, const double *prob, const int64_t *tgt,
                     const uint8_t *valid, size_t count, double *dlog) {
    nll_back_ctx c = {V, prob, tgt, valid, 1.0 / (double)count, dlog}; /* multiplies by 1/N */
    pd_parallel_for(N, 1 + 16384 / (V ? V : 1), nll_back_rows, &c);
}
