/* SPDX-License-Identifier: MIT */
/* Canonical zero: +0.0 for either zero, every other value unchanged (docs/numerics.md §1.1). */
#ifndef PD_OPS_CANON_H
#define PD_OPS_CANON_H

static inline double pd_canon(double v) { return v == 0.0 ? 0.0 : v; }

#endif
