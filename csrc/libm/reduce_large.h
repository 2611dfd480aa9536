/* SPDX-License-Identifier: MIT */
/* The large reduction of sin and cos (docs/numerics-elementary.md §6.5). */
#ifndef PD_LIBM_REDUCE_LARGE_H
#define PD_LIBM_REDUCE_LARGE_H

/* B1-B4: x = n pi/2 + (a + da) for 105414336 <= |x| < inf; returns n mod 4. No fma. */
int pd_libm_reduce_large(double x, double *a, double *da);
#endif
