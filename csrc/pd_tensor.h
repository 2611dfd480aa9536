/* SPDX-License-Identifier: MIT */
/* Checked size arithmetic, zeroed float64 buffers and the finiteness scan (pd_tensor.c). */
#ifndef PD_TENSOR_H
#define PD_TENSOR_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "pd_error.h"
#include "kernels/nonfinite.h" /* pd_nonfinite_bit */

/* *out = a * b; returns 0 on overflow. */
static inline int pd_mul_ok(size_t a, size_t b, size_t *out) {
#if defined(__GNUC__) || defined(__clang__)
    return !__builtin_mul_overflow(a, b, out);
#else
    *out = a * b;
    return a == 0 || *out / a == b;
#endif
}
static inline int pd_add_ok(size_t a, size_t b, size_t *out) {
#if defined(__GNUC__) || defined(__clang__)
    return !__builtin_add_overflow(a, b, out);
#else
    *out = a + b;
    return *out >= a;
#endif
}

/* Zero-filled buffer of n doubles (n may be 0); NULL with PD_ERR_ALLOC/OVERFLOW in e. */
double *pd_zeros(size_t n, pd_error *e);

/* Whether n doubles could be allocated right now (allocates and frees them, untouched), so a
 * caller can refuse a huge request before building anything proportional to it. */
int pd_can_allocate(size_t n);

/* True when every element is finite; *where receives the first offending index. */
int pd_all_finite(const double *x, size_t n, size_t *where);
/* Doubles of the tied head handled while in cache (about half a megabyte): the forward's logits
 * blocks, scanned as they are made, and the reverse pass's embedding-gradient blocks, committed
 * as they are made. */
#define PD_HEAD_BLOCK 65536

/* True when every element of the rows x cols block at x (rows ld apart) is finite. */
int pd_block_finite(const double *x, size_t rows, size_t ld, size_t cols);
/* PD_OK, or PD_ERR_NONFINITE naming the first non-finite element of the value (block, node). */
pd_status pd_check_finite(const double *x, size_t n, int block, int node, pd_error *e);

#endif
