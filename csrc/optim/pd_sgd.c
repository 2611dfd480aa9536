/* SPDX-License-Identifier: MIT */
/* SGD with optional momentum and L2 weight decay (PyTorch's SGD without dampening/nesterov). */
#include <math.h>
#include <stdlib.h>
#include "pd_sgd.h"

typedef struct {
    double lr, momentum, weight_decay;
    int first; /* the momentum buffer starts as the first direction */
} sgd_scalars;

/* The new value and momentum buffer of one element, in the contract's operation order. */
static inline void sgd_element(const sgd_scalars *s, double p, double g, double b, double *p1, double *b1) {
    double d = g;
    if (s->weight_decay != 0.0) d = d + s->weight_decay * p;
    if (s->momentum != 0.0) {
        d = s->first ? d : b * s->momentum + d;
        *b1 = d;
    }
    *p1 = p + (-s->lr) * d;
}

static size_t sgd_chunk(const void *vs, const pd_optim_tensor *t, size_t begin, size_t end,
                        int commit, int *slot, double *value) {
    const sgd_scalars sc = *(const sgd_scalars *)vs, *s = &sc; /* a local copy: stores cannot alias it */
    const double *restrict g = t->param->grad;
    double *restrict p = t->param->value;
    double *restrict buf = t->slot[0]; /* read and written only when momentum != 0 */
    const int momentum = s->momentum != 0.0;
    double p1, b1 = 0.0;
    if (commit && momentum) {
        for (size_t i = begin; i < end; i++) sgd_element(s, p[i], g[i], buf[i], &p[i], &buf[i]);
        return end;
    }
    if (commit) {
        for (size_t i = begin; i < end; i++) sgd_element(s, p[i], g[i], 0.0, &p[i], &b1);
        return end;
    }
    int ok = 1; /* a branch-free scan first; the offender is located only on failure */
    if (momentum) {
        for (size_t i = begin; i < end; i++) {
            sgd_element(s, p[i], g[i], buf[i], &p1, &b1);
            ok &= pd_finite(p1) & pd_finite(b1);
        }
    } else {
        for (size_t i = begin; i < end; i++) {
            sgd_element(s, p[i], g[i], 0.0, &p1, &b1);
            ok &= pd_finite(p1);
        }
    }
    if (ok) return end;
    for (size_t i = begin; i < end; i++) {
        b1 = 0.0;
        sgd_element(s, p[i], g[i], momentum ? buf[i] : 0.0, &p1, &b1);
        if (!pd_finite(p1) || !pd_finite(b1)) {
            *slot = pd_finite(p1) ? 1 : 0;
            *value = pd_finite(p1) ? b1 : p1;
            return i;
        }
    }
    return end;
}

pd_status pd_sgd_check(const pd_sgd_hparams *h, pd_error *e) {
    const double f[3] = {h->lr, h->momentum, h->weight_decay};
    for (size_t k = 0; k < 3; k++)
        if (!isfinite(f[k]) || f[k] < 0.0) return pd_fail(e, PD_ERR_CONFIG, k, f[k], -1, -1);
    return PD_OK;
}

pd_status pd_sgd_step(const pd_optim_tensor *t, size_t n, const pd_sgd_hparams *h, size_t nh,
                      uint64_t step, pd_error *e) {
    if (nh != 1 && nh != n) return pd_fail(e, PD_ERR_LAYOUT, nh, 0.0, -1, -1);
    for (size_t k = 0; k < nh; k++) {
        pd_status st = pd_sgd_check(&h[k], e);
        if (st == PD_OK && h[k].momentum != h[0].momentum) st = pd_fail(e, PD_ERR_CONFIG, 1, h[k].momentum, -1, -1);
        if (st != PD_OK) {
            if (nh > 1) e->block = (int)k;
            return st;
        }
    }
    if (step == 0) return pd_fail(e, PD_ERR_CONFIG, 3, 0.0, -1, -1);
    for (size_t i = 0; i < n; i++)
        if (h->momentum != 0.0 && !t[i].slot[0]) return pd_fail(e, PD_ERR_LAYOUT, i, 0.0, (int)i, 1);
    if (nh == 1) {
        const sgd_scalars s = {h->lr, h->momentum, h->weight_decay, step == 1};
        return pd_optim_apply(t, n, &s, 0, sgd_chunk, e);
    }
    sgd_scalars *s = malloc(nh * sizeof *s);
    if (!s) return pd_fail(e, PD_ERR_ALLOC, nh, 0.0, -1, -1);
    for (size_t k = 0; k < nh; k++) s[k] = (sgd_scalars){h[k].lr, h[k].momentum, h[k].weight_decay, step == 1};
    pd_status st = pd_optim_apply(t, n, s, sizeof *s, sgd_chunk, e);
    free(s);
    return st;
}
