/* SPDX-License-Identifier: MIT */
/* The element steps every softmax row takes (the loss rows, attention's weight rows, the array
 * exp's shifted form in libm/exp_array.c), written once as function bodies; each caller compiles
 * them in its per-path variants (isa.h), so the operations per element are the same everywhere. */
#ifndef PD_OPS_SOFTMAX_STEPS_H
#define PD_OPS_SOFTMAX_STEPS_H
#include <stddef.h>
#include "canon.h"

/* dst = src - mx over [0, n); returns the first index whose shift is zero (n when none), as a
 * minimum of indices so the loop has no exit. dst may be src. */
#define PD_SHIFT_BODY(src, dst, n, mx)                                                 \
    size_t fm_ = (n);                                                                  \
    for (size_t j_ = 0; j_ < (n); j_++) {                                              \
        const double d_ = (src)[j_] - (mx);                                            \
        const size_t at_ = d_ == 0.0 ? j_ : (n);                                       \
        (dst)[j_] = d_;                                                                \
        fm_ = at_ < fm_ ? at_ : fm_;                                                   \
    }                                                                                  \
    return fm_

/* p = canon(p / den) over [0, n) */
#define PD_DIVIDE_BODY(p, n, den) for (size_t j_ = 0; j_ < (n); j_++) (p)[j_] = pd_canon((p)[j_] / (den))

#endif
