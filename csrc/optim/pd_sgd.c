/* SGD with optional momentum and L2 weight decay (PyTorch's SGD without dampening/nesterov). */
#include <math.h>
#include "pd_sgd.h"

typedef struct {
    double lr, momentum, weight_decay;
    int first; /* the momentum buffer starts as the first direction */
} sgd_scalars;

static size_t sgd_chunk(const void *vs, const pd_optim_tensor *t, size_t begin, size_t end,
                        int commit, int *slot, double *value) {
    const sgd_scalars *s = vs;
    const double *g = t->param->grad;
    double *p = t->param->value, *buf = t->slot[0];
    const int use_momentum = s->momentum != 0.0;
    for (size_t i = begin; i < end; i++) {
        double d = g[i];
        if (s->weight_decay != 0.0) d = d + s->weight_decay * p[i];
        double b = 0.0;
        if (use_momentum) {
            b = s->first ? d : buf[i] * s->momentum + d;
            d = b;
        }
        const double p1 = p[i] + (-s->lr) * d;
        if (commit) {
            if (use_momentum) buf[i] = b;
            p[i] = p1;
        } else if (!isfinite(p1) || (use_momentum && !isfinite(b))) {
            *slot = isfinite(p1) ? 1 : 0;
            *value = isfinite(p1) ? b : p1;
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

pd_status pd_sgd_step(const pd_optim_tensor *t, size_t n, const pd_sgd_hparams *h, uint64_t step,
                      pd_error *e) {
    pd_status st = pd_sgd_check(h, e);
    if (st != PD_OK) return st;
    if (step == 0) return pd_fail(e, PD_ERR_CONFIG, 3, 0.0, -1, -1);
    for (size_t i = 0; i < n; i++)
        if (h->momentum != 0.0 && !t[i].slot[0]) return pd_fail(e, PD_ERR_LAYOUT, i, 0.0, (int)i, 1);
    const sgd_scalars s = {h->lr, h->momentum, h->weight_decay, step == 1};
    return pd_optim_apply(t, n, &s, sgd_chunk, e);
}
