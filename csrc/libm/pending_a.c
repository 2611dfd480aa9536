/* SPDX-License-Identifier: MIT */
/* Placeholder for exp, log and pow until they are written from the specification: NaN. */
#include <math.h>
#include "variant.h"
#include "libm_internal.h"

PD_VATTR double PD_V(exp)(double x) { return x - x + NAN; }
PD_VATTR double PD_V(log)(double x) { return x - x + NAN; }
PD_VATTR double PD_V(pow)(double x, double y) { return x - y + NAN; }
