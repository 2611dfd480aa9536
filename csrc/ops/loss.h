/* Valid-target mean NLL from the logits and its VJP (ops/loss.c). */
#ifndef PD_OPS_LOSS_H
#define PD_OPS_LOSS_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

/* Valid-target mean NLL from logits [N, V]; prob receives the saved softmax and per_target
 * each valid group's NLL (+0.0 where invalid). */
pd_status pd_nll_forward(size_t N, size_t V, const double *logits, const int64_t *tgt,
                         const uint8_t *valid, double *prob, double *per_target, double *loss,
                         size_t *count, pd_error *e);
/* dlog may be prob itself (the adjoint written over the saved softmax). */
void pd_nll_backward(size_t N, size_t V, const double *prob, const int64_t *tgt,
                     const uint8_t *valid, size_t count, double *dlog);

#endif
