/* A double's IEEE-754 bits and back, without aliasing: the one owner of the conversion for
 * csrc/libm (the fused emulation and the functions both read it). Internal to csrc/libm. */
#ifndef PD_LIBM_FLOAT_BITS_H
#define PD_LIBM_FLOAT_BITS_H
#include <stdint.h>
#include <string.h>

static inline uint64_t pd_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double pd_from_bits(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
