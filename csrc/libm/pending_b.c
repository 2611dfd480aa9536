/* SPDX-License-Identifier: MIT */
/* Placeholder for log1p, sin and cos until they are written from the specification: NaN. */
#include <math.h>
#include "variant.h"
#include "libm_internal.h"

PD_VATTR double PD_V(log1p)(double x) { return x - x + NAN; }
PD_VATTR double PD_V(sin)(double x) { return x - x + NAN; }
PD_VATTR double PD_V(cos)(double x) { return x - x + NAN; }
