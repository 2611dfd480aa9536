/* SPDX-License-Identifier: MIT */
/* The head split and merge relabellings (ops/heads.c). */
#ifndef PD_OPS_HEADS_H
#define PD_OPS_HEADS_H
#include <stddef.h>
#include <stdint.h>

/* Splits [B,T,Hn*D] rows into heads [B,Hn,T,D] and back; nonzero when a value is not finite. */
int pd_split_heads(size_t B, size_t T, size_t Hn, size_t D, const double *x, double *heads);
int pd_merge_heads(size_t B, size_t T, size_t Hn, size_t D, const double *heads, double *x);

#endif
