/* SPDX-License-Identifier: MIT */
/* SGD with optional momentum and L2 weight decay (pd_sgd.c). */
#ifndef PD_SGD_H
#define PD_SGD_H
#include <stdint.h>
#include "pd_optim.h"

typedef struct { double lr, momentum, weight_decay; } pd_sgd_hparams;

/* PD_ERR_CONFIG with e->index = the field's position (lr, momentum, weight_decay; 3 = step) and
 * e->value = its value when it is not finite and >= 0. */
pd_status pd_sgd_check(const pd_sgd_hparams *h, pd_error *e);

/* Takes step number `step` (1 for the first) over n tensors (slot[0] = momentum buffer, read only
 * when momentum != 0), all or nothing as pd_optim_apply describes. h holds nh sets: 1 shared by
 * every tensor, or n, one per tensor; every set has the same momentum (it decides the slots). */
pd_status pd_sgd_step(const pd_optim_tensor *t, size_t n, const pd_sgd_hparams *h, size_t nh,
                      uint64_t step, pd_error *e);

#endif
