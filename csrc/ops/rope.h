/* RoPE tables and rotations (ops/rope.c). */
#ifndef PD_OPS_ROPE_H
#define PD_OPS_ROPE_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

/* RoPE tables [P, D/2]. */
pd_status pd_rope_tables(size_t P, size_t D, double base, double *sin_t, double *cos_t, pd_error *e);
/* Rotates heads [B, Hn, T, D] by positions pos[b*T+t]; inverse applies the VJP rotation. */
void pd_rope_apply(size_t B, size_t Hn, size_t T, size_t D, const size_t *pos,
                   const double *sin_t, const double *cos_t, const double *in, double *out,
                   int inverse);

#endif
