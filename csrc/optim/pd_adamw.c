/* SPDX-License-Identifier: MIT */
/* AdamW: Adam with decoupled weight decay and bias correction (PyTorch's single-tensor AdamW). */
#include <math.h>
#include <stdlib.h>
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

/* The three results of one element, in the contract's operation order. */
static inline void adamw_element(const adamw_scalars *s, double p, double g, double m, double v,
                                 double *p1, double *m1, double *v1) {
    const double p0 = s->decays ? p * s->decay : p;
    *m1 = lerp_moment(m, g, s->w1);
    *v1 = v * s->beta2 + (s->c2 * g) * g;
    const double denom = sqrt(*v1) / s->bc2_sqrt + s->eps;
    *p1 = p0 + (s->neg_step * *m1) / denom;
}

static size_t adamw_chunk(const void *vs, const pd_optim_tensor *t, size_t begin, size_t end,
                          int commit, int *slot, double *value) {
    const adamw_scalars sc = *(const adamw_scalars *)vs, *s = &sc; /* a local copy: stores cannot alias it */
    const double *restrict g = t->param->grad;
    double *restrict p = t->param->value, *restrict m = t->slot[0], *restrict v = t->slot[1];
    double p1, m1, v1;
    if (commit) {
        for (size_t i = begin; i < end; i++) adamw_element(s, p[i], g[i], m[i], v[i], &p[i], &m[i], &v[i]);
        return end;
    }
    int ok = 1; /* a branch-free scan first (it vectorizes); the offender is located only on failure */
    for (size_t i = begin; i < end; i++) {
        adamw_element(s, p[i], g[i], m[i], v[i], &p1, &m1, &v1);
        ok &= pd_finite(p1) & pd_finite(m1) & pd_finite(v1);
    }
    if (ok) return end;
    for (size_t i = begin; i < end; i++) {
        adamw_element(s, p[i], g[i], m[i], v[i], &p1, &m1, &v1);
        const double r[3] = {p1, m1, v1};
        for (int k = 0; k < 3; k++) {
            if (!pd_finite(r[k])) {
                *slot = k;
                *value = r[k];
                return i;
            }
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

static adamw_scalars adamw_prepare(const pd_adamw_hparams *h, uint64_t step) {
    adamw_scalars s;
    s.decay = 1.0 - h->lr * h->weight_decay;
    s.decays = h->weight_decay != 0.0;
    s.w1 = 1.0 - h->beta1;
    s.beta2 = h->beta2;
    s.c2 = 1.0 - h->beta2;
    s.eps = h->eps;
    s.neg_step = -(h->lr / (1.0 - pd_powi(h->beta1, step)));
    s.bc2_sqrt = sqrt(1.0 - pd_powi(h->beta2, step));
    return s;
}

pd_status pd_adamw_step(const pd_optim_tensor *t, size_t n, const pd_adamw_hparams *h, size_t nh,
                        uint64_t step, pd_error *e) {
    if (nh != 1 && nh != n) return pd_fail(e, PD_ERR_LAYOUT, nh, 0.0, -1, -1);
    for (size_t k = 0; k < nh; k++) {
        pd_status st = pd_adamw_check(&h[k], e);
        if (st != PD_OK) {
            if (nh > 1) e->block = (int)k;
            return st;
        }
    }
    if (step == 0) return pd_fail(e, PD_ERR_CONFIG, 5, 0.0, -1, -1);
    for (size_t i = 0; i < n; i++)
        if (!t[i].slot[0] || !t[i].slot[1]) return pd_fail(e, PD_ERR_LAYOUT, i, 0.0, (int)i, 1);
    if (nh == 1) {
        const adamw_scalars s = adamw_prepare(h, step);
        return pd_optim_apply(t, n, &s, 0, adamw_chunk, e);
    }
    adamw_scalars *s = malloc(nh * sizeof *s);
    if (!s) return pd_fail(e, PD_ERR_ALLOC, nh, 0.0, -1, -1);
    for (size_t k = 0; k < nh; k++) s[k] = adamw_prepare(&h[k], step);
    pd_status st = pd_optim_apply(t, n, s, sizeof *s, adamw_chunk, e);
    free(s);
    return st;
}
