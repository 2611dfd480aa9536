/* SPDX-License-Identifier: MIT */
/* RoPE tables and rotations (ops/rope.c). */
#ifndef PD_OPS_ROPE_H
#define PD_OPS_ROPE_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

/* RoPE tables [P, D/2]. */
pd_status pd_rope_tables(size_t P, size_t D, double base, double *sin_t, double *cos_t, pd_error *e);
/* What a batch's rotations read: B rows of T positions, pos[b*T+t] each one's segment-local
 * position, and the tables [P, D/2] of heads D wide. */
typedef struct {
    size_t B, T, D;
    const size_t *pos;
    const double *sin_t, *cos_t;
} pd_rope;

/* Rotates heads [B, Hn, T, D] by their positions; inverse applies the VJP rotation. Nonzero
 * when some value read is not finite. */
int pd_rope_apply(const pd_rope *r, size_t Hn, const double *in, double *out, int inverse);
/* pd_split_heads of token rows x [B, T, Hn*D] into heads and pd_rope_apply of those heads into
 * rot, in one sweep: the same values. Nonzero when some value of x is not finite. */
int pd_rope_split(const pd_rope *r, size_t Hn, const double *x, double *heads, double *rot);
/* pd_rope_apply's inverse of rot into heads and pd_merge_heads of those into token rows x, in
 * one sweep: the same values. Nonzero when some value of rot is not finite. */
int pd_rope_unrotate_merge(const pd_rope *r, size_t Hn, const double *rot, double *heads, double *x);

#endif
