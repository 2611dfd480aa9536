/* SPDX-License-Identifier: MIT */
/* SiLU, residual adds, the gate product and the SwiGLU VJP, elementwise (ops/swiglu.c). */
#ifndef PD_OPS_SWIGLU_H
#define PD_OPS_SWIGLU_H
#include <stddef.h>
#include <stdint.h>

/* Which outputs of the elementwise passes hold a non-finite value, as bits of their results. */
enum { PD_BAD_SILU = 1, PD_BAD_UP = 2, PD_BAD_PRODUCT = 4, PD_BAD_GATE_LINEAR = 8, PD_BAD_ADDEND = 16,
       PD_BAD_SUM = 32 };

/* SiLU: sg (sigmoid, kept for the reverse pass) and out = x*sg; with up, also the gate product
 * prod = out*up. Returns PD_BAD_GATE_LINEAR (x read), PD_BAD_SILU, PD_BAD_UP (up read) and
 * PD_BAD_PRODUCT bits. */
int pd_swiglu_forward(size_t n, const double *x, const double *up, double *sg, double *out, double *prod);
/* out = a + b, elementwise; returns PD_BAD_ADDEND (b read) and PD_BAD_SUM (out) bits. */
int pd_add_vec(size_t n, const double *a, const double *b, double *out);
/* What the gate product's VJP reads from the forward: up, the gate's SiLU gs, its sigmoid sg
 * and its linear input gl. */
typedef struct {
    const double *up, *gs, *sg, *gl;
} pd_swiglu_saved;
/* The adjoints it writes; gs may be NULL (not stored). */
typedef struct {
    double *gs, *up, *gl;
} pd_swiglu_grads;

/* d.gs = d_pr*up, d.up = d_pr*gs, d.gl = d.gs*(sg*(1 + gl*(1 - sg))), for n elements; returns
 * PD_BAD_PRODUCT, PD_BAD_GATE_LINEAR and PD_BAD_UP bits for d_pr, d.gl and d.up. */
int pd_swiglu_backward(size_t n, const double *d_pr, const pd_swiglu_saved *s, const pd_swiglu_grads *d);

#endif
