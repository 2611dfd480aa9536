/* SPDX-License-Identifier: MIT */
/* SiLU, residual adds, the gate product and the SwiGLU VJP, elementwise (ops/swiglu.c). */
#ifndef PD_OPS_SWIGLU_H
#define PD_OPS_SWIGLU_H
#include <stddef.h>
#include <stdint.h>

/* SiLU: sg (sigmoid, kept for the reverse pass) and out = x*sg. */
void pd_silu_forward(size_t n, const double *x, double *sg, double *out);
/* out = a + b and out = a * b, elementwise. */
void pd_add_vec(size_t n, const double *a, const double *b, double *out);
void pd_mul_vec(size_t n, const double *a, const double *b, double *out);
/* What the gate product's VJP reads from the forward: up, the gate's SiLU gs, its sigmoid sg
 * and its linear input gl. */
typedef struct {
    const double *up, *gs, *sg, *gl;
} pd_swiglu_saved;
/* The adjoints it writes. */
typedef struct {
    double *gs, *up, *gl;
} pd_swiglu_grads;

/* d.gs = d_pr*up, d.up = d_pr*gs, d.gl = d.gs*(sg*(1 + gl*(1 - sg))), for n elements. */
void pd_swiglu_backward(size_t n, const double *d_pr, const pd_swiglu_saved *s, const pd_swiglu_grads *d);

#endif
