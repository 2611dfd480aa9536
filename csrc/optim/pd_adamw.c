/* AdamW: Adam with decoupled weight decay and bias correction (PyTorch's single-tensor AdamW). */
#include <math.h>
#include "pd_adamw.h"

typedef struct {
    double decay;       /* 1 - lr*weight_decay */
    int decays;         /* weight_decay != 0 */
    double w1, beta2, c2, eps;
    double neg_step;    /* -(lr / (1 - beta1**t)) */
    double bc2_sqrt;    /* sqrt(1 - beta2**t) */
} adamw_scalars;

/* m + w1*(g - m) for a small weight, else g - (g - m)*(1 - w1): PyTorch's lerp branches. */
static inline double lerp_moment(double m, double g, double w1) {
    return w1 < 0.5 ? m + w1 * (g - m) : g - (g - m) * (1.0 - w1);
}

static size_t adamw_chunk(const void *vs, const pd_optim_tensor *t, size_t begin, size_t end,
                          int commit, int *slot, double *value) {
    const adamw_scalars *s = vs;
    const double *g = t->param->grad;
    double *p = t->param->value, *m = t->slot[0], *v = t->slot[1];
    for (size_t i = begin; i < end; i++) {
        const double p0 = s->decays ? p[i] * s->decay : p[i];
        const double m1 = lerp_moment(m[i], g[i], s->w1);
        const double v1 = v[i] * s->beta2 + (s->c2 * g[i]) * g[i];
        const double denom = sqrt(v1) / s->bc2_sqrt + s->eps;
        const double p1 = p0 + (s->neg_step * m1) / denom;
        if (commit) {
            p[i] = p1;
            m[i] = m1;
            v[i] = v1;
        } else if (!isfinite(p1) || !isfinite(m1) || !isfinite(v1)) {
            *slot = !isfinite(p1) ? 0 : !isfinite(m1) ? 1 : 2;
            *value = !isfinite(p1) ? p1 : !isfinite(m1) ? m1 : v1;
            return i;
        }
    }
    return end;
}

pd_status pd_adamw_check(const pd_adamw_hparams *h, pd_error *e) {
    const double f[5] = {h->lr, h->beta1, h->beta2, h->eps, h->weight_decay};
    for (size_t k = 0; k < 5; k++) {
        const int beta = k == 1 || k == 2;
        if (!isfinite(f[k]) || f[k] < 0.0 || (beta && f[k] >= 1.0))
            return pd_fail(e, PD_ERR_CONFIG, k, f[k], -1, -1);
    }
    return PD_OK;
}

pd_status pd_adamw_step(const pd_optim_tensor *t, size_t n, const pd_adamw_hparams *h,
                        uint64_t step, pd_error *e) {
    pd_status st = pd_adamw_check(h, e);
    if (st != PD_OK) return st;
    if (step == 0) return pd_fail(e, PD_ERR_CONFIG, 5, 0.0, -1, -1);
    for (size_t i = 0; i < n; i++)
        if (!t[i].slot[0] || !t[i].slot[1]) return pd_fail(e, PD_ERR_LAYOUT, i, 0.0, (int)i, 1);
    adamw_scalars s;
    s.decay = 1.0 - h->lr * h->weight_decay;
    s.decays = h->weight_decay != 0.0;
    s.w1 = 1.0 - h->beta1;
    s.beta2 = h->beta2;
    s.c2 = 1.0 - h->beta2;
    s.eps = h->eps;
    s.neg_step = -(h->lr / (1.0 - pd_powi(h->beta1, step)));
    s.bc2_sqrt = sqrt(1.0 - pd_powi(h->beta2, step));
    return pd_optim_apply(t, n, &s, adamw_chunk, e);
}
