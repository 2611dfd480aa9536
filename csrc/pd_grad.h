/* SPDX-License-Identifier: MIT */
/* A parameter's gradient writers outside the reverse pass (pd_grad.c). Each keeps
 * pd_param.grad_zero true only while every gradient element is +0.0, so the gradient
 * transaction may write a contribution straight into such a gradient (pd_grad_txn.c). */
#ifndef PD_GRAD_H
#define PD_GRAD_H
#include "pd_decoder.h"

/* Every element to +0.0. */
void pd_grad_zero(pd_param *p);
/* pd_grad_zero of every parameter, the zeroing split over the pool. */
void pd_grads_zero(pd_param *const *params, size_t n);
/* Copies p->size values from src (a restore); the flag holds only if they are all +0.0. */
void pd_grad_set(pd_param *p, const double *src);

#endif
