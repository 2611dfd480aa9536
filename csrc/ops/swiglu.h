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
/* d_gs = d_pr*up, d_up = d_pr*gs, d_gl = d_gs*(sg*(1 + gl*(1 - sg))). */
void pd_swiglu_backward(size_t n, const double *d_pr, const double *up, const double *gs,
                        const double *sg, const double *gl, double *d_gs, double *d_up,
                        double *d_gl);

#endif
