/* SPDX-License-Identifier: MIT */
/* The branch-free finiteness bit shared by the kernels' and the core's scans. */
#ifndef PD_NONFINITE_H
#define PD_NONFINITE_H
#include <stdint.h>
#include <string.h>

/* Bit 63 is set exactly when v is an infinity or a NaN: the exponent field plus its lowest
 * bit carries into the sign position only when the field is all ones. OR-ing these over an
 * array is a branch-free reduction the compiler vectorizes (isfinite's compare is not). */
static inline uint64_t pd_nonfinite_bit(double v) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return (b & 0x7FF0000000000000u) + 0x0010000000000000u;
}

#endif
