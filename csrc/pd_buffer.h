/* SPDX-License-Identifier: MIT */
/* Pooled float64 buffers for the arenas of forward, loss and backward (pd_buffer.c). */
#ifndef PD_BUFFER_H
#define PD_BUFFER_H
#include <stddef.h>
#include "pd_error.h"

/* A buffer of n doubles from the reuse pool (zero-filled when zero != 0, else contents are
 * unspecified); give it back with pd_buf_put. NULL with PD_ERR_ALLOC/OVERFLOW in e. */
double *pd_buf_get(size_t n, int zero, pd_error *e);
void pd_buf_put(double *p);
/* How many blocks are parked for reuse now (tests/c/buffer_check.c). */
size_t pd_buf_parked(void);

#endif
