/* Checked size arithmetic and float64 buffer allocation. */
#ifndef PD_TENSOR_H
#define PD_TENSOR_H
#include <stddef.h>
#include <stdint.h>
#include "pd_error.h"

/* *out = a * b; returns 0 on overflow. */
static inline int pd_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int pd_add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Zero-filled buffer of n doubles (n may be 0); NULL with PD_ERR_ALLOC/OVERFLOW in e. */
double *pd_zeros(size_t n, pd_error *e);

/* A buffer of n doubles from the reuse pool (zero-filled when zero != 0, else contents are
 * unspecified); give it back with pd_buf_put. NULL with PD_ERR_ALLOC/OVERFLOW in e. */
double *pd_buf_get(size_t n, int zero, pd_error *e);
void pd_buf_put(double *p);
/* Frees every parked buffer. */
void pd_buf_release_all(void);

/* True when every element is finite; *where receives the first offending index. */
int pd_all_finite(const double *x, size_t n, size_t *where);

#endif
