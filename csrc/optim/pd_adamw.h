/* SPDX-License-Identifier: MIT */
/* AdamW: Adam with decoupled weight decay and bias correction (pd_adamw.c). */
#ifndef PD_ADAMW_H
#define PD_ADAMW_H
#include <stdint.h>
#include "pd_optim.h"

typedef struct { double lr, beta1, beta2, eps, weight_decay; } pd_adamw_hparams;

/* PD_ERR_CONFIG with e->index = the field's position (lr, beta1, beta2, eps, weight_decay;
 * 5 = step) and e->value = its value: lr, eps, weight_decay finite and >= 0, betas in [0, 1). */
pd_status pd_adamw_check(const pd_adamw_hparams *h, pd_error *e);

/* Takes step number `step` (1 for the first) over n tensors (slot[0] = exp_avg, slot[1] =
 * exp_avg_sq), all or nothing as pd_optim_apply describes. h holds nh sets: 1 shared by every
 * tensor, or n, one per tensor (a set that fails its check names its tensor in e->block). */
pd_status pd_adamw_step(const pd_optim_tensor *t, size_t n, const pd_adamw_hparams *h, size_t nh,
                        uint64_t step, pd_error *e);

#endif
