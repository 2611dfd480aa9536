/* SPDX-License-Identifier: MIT */
/* The emulated fma as a callable function, for the test against the C library (§7.2, §11). */
#include "pd_libm.h"
#include "fma_soft.h"

double pd_fma_soft(double a, double b, double c) { return pd_fma_inline(a, b, c); }
