/* SPDX-License-Identifier: MIT */
/* exp (docs/numerics-elementary.md §2): the input classes of §2.1 by the bits of |x|. */
#include "exp_core.h"
#include "libm_internal.h"

#define PD_EXP_TINY 0x3c90000000000000ull /* 2^-54 */
#define PD_EXP_WIDE 0x4080000000000000ull /* 512 */
#define PD_EXP_OUT 0x4090000000000000ull  /* 1024 */

PD_VATTR double PD_V(exp)(double x) {
    const uint64_t ax = pd_bits(x) & ~PD_EXPC_SIGN;
    if (ax < PD_EXP_TINY) return 1.0;                                      /* §2.1 */
    if (ax < PD_EXP_WIDE) return pd_expc_eval(x, 0.0, 0, 0, 0);            /* §2.2 */
    if (ax < PD_EXP_OUT) return pd_expc_eval(x, 0.0, 0, 1, 0);             /* §2.3 */
    if (ax > 0x7ff0000000000000ull) return pd_quiet(x);                    /* §10 */
    return x > 0.0 ? pd_inf() : 0.0;                                       /* §2.1 */
}
