/* SPDX-License-Identifier: MIT */
/* A parameter's value and gradient blocks (pd_param_mem.c). */
#ifndef PD_PARAM_MEM_H
#define PD_PARAM_MEM_H
#include <stddef.h>
#include "pd_model.h"

/* A parameter of n elements: value and grad all +0.0, each starting on a 64-byte line.
 * PD_ERR_ALLOC leaves p's buffers NULL; pd_param_release(p) is always safe after it. */
pd_status pd_param_alloc(pd_param *p, size_t n);
void pd_param_release(pd_param *p);

#endif
