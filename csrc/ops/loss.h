/* SPDX-License-Identifier: MIT */
/* Valid-target mean NLL from the logits and its VJP (ops/loss.c). */
#ifndef PD_OPS_LOSS_H
#define PD_OPS_LOSS_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

/* The targets of N positions over a vocabulary of V: tgt[g] counts only where valid[g] != 0
 * (valid may be NULL: every position counts). */
typedef struct {
    size_t N, V;
    const int64_t *tgt;
    const uint8_t *valid;
} pd_nll_targets;

/* Valid-target mean NLL from logits [N, V] into *loss, over *count valid targets; prob receives
 * the saved softmax (prob may be logits: each row is read before it is written) and per_target
 * each valid group's NLL (+0.0 where invalid). */
pd_status pd_nll_forward(const pd_nll_targets *t, const double *logits, double *prob,
                         double *per_target, double *loss, size_t *count, pd_error *e);
/* dlog may be prob itself (the adjoint written over the saved softmax). */
void pd_nll_backward(const pd_nll_targets *t, const double *prob, size_t count, double *dlog);

#endif
