/* log: x = 2^k z with z in [0x1.6p-1, 0x1.6p0); z lies in one of N = 128 subintervals with a
 * tabulated c near its centre, and log(x) = k ln2 + log(c) + log1p(z/c - 1), the last by a
 * degree-6 polynomial. Near 1 (0x1.ep-1 <= x < 0x1.1090p0) a degree-12 polynomial in x - 1
 * with an exact split of the quadratic term instead. */
#include "log.h"
#include "pd_libm_bits.h"
#include "pd_libm_data.h"

static const double ln2_hi = 0x1.62e42fefa3800p-1, ln2_lo = 0x1.ef35793c76730p-45;
/* log1p(r) - r ~ A0 r^2 + ... + A4 r^6 */
static const double A0 = -0x1.0000000000001p-1, A1 = 0x1.555555551305bp-2,
                    A2 = -0x1.fffffffeb4590p-3, A3 = 0x1.999b324f10111p-3,
                    A4 = -0x1.55575e506c89fp-3;
/* log(1 + r) ~ r + B0 r^2 + ... + B10 r^12 near 1 */
static const double B[11] = {-0x1.0000000000000p-1, 0x1.5555555555577p-2, -0x1.ffffffffffdcbp-3,
                             0x1.999999995dd0cp-3,  -0x1.55555556745a7p-3, 0x1.24924a344de30p-3,
                             -0x1.fffffa4423d65p-4, 0x1.c7184282ad6cap-4,  -0x1.999eb43b068ffp-4,
                             0x1.78182f7afd085p-4,  -0x1.5521375d145cdp-4};

#define OFF 0x3fe6000000000000ull

PD_LIBM_INLINE double log_near_one(int hw, double x) {
    const double r = x - 1.0;
    const double r2 = r * r, r3 = r * r2;
    /* r^3 * (B1 + r B2 + r^2 B3 + r^3 (B4 + r B5 + r^2 B6 + r^3 (B7 + r B8 + r^2 B9 + r^3 B10))) */
    const double p1 = pd_fma(hw, r2, B[3], pd_fma(hw, r, B[2], B[1]));
    const double p2 = pd_fma(hw, r2, B[6], pd_fma(hw, r, B[5], B[4]));
    const double p3 = pd_fma(hw, r3, B[10], pd_fma(hw, r2, B[9], pd_fma(hw, r, B[8], B[7])));
    const double p = pd_fma(hw, pd_fma(hw, p3, r3, p2), r3, p1);
    /* r + B0 r^2 with rhi the top 26 bits of r, so rhi*rhi is exact */
    const double rhi = pd_fma(hw, -r, 0x1p27, pd_fma(hw, r, 0x1p27, r));
    const double rlo = r - rhi;
    const double w = rhi * rhi;
    const double hi = pd_fma(hw, w, B[0], r);
    double lo = pd_fma(hw, w, B[0], r - hi);
    lo = pd_fma(hw, B[0] * rlo, rhi + r, lo);
    return pd_fma(hw, p, r3, lo) + hi;
}

PD_LIBM_INLINE double log_body(int hw, double x) {
    uint64_t ix = pd_bits(x);
    const uint32_t top = (uint32_t)(ix >> 48);
    if (ix - pd_bits(1.0 - 0x1p-4) < pd_bits(1.0 + 0x1.09p-4) - pd_bits(1.0 - 0x1p-4)) {
        if (ix == pd_bits(1.0)) return 0.0;
        return log_near_one(hw, x);
    }
    if (top - 0x0010 >= 0x7ff0 - 0x0010) {
        if (ix * 2 == 0) return -INFINITY;            /* log(+-0) */
        if (ix == pd_bits(INFINITY)) return x;       /* log(inf) */
        if ((top & 0x8000) || (top & 0x7ff0) == 0x7ff0) return (x - x) / (x - x); /* x < 0, NaN */
        ix = pd_bits(x * 0x1p52) - (52ull << 52);    /* subnormal: normalise */
    }
    const uint64_t tmp = ix - OFF;
    const int i = (int)((tmp >> (52 - 7)) % PD_LOG_N);
    const int k = (int)((int64_t)tmp >> 52);
    const double z = pd_from_bits(ix - (tmp & 0xfffull << 52));
    const double invc = pd_log_table[i].invc, logc = pd_log_table[i].logc;
    const double kd = (double)k;
    const double r = pd_fma(hw, z, invc, -1.0); /* exact: 1/c has few bits */
    /* hi + lo = k ln2 + log(c) + r */
    const double w = pd_fma(hw, kd, ln2_hi, logc);
    const double hi = w + r;
    const double lo = pd_fma(hw, kd, ln2_lo, w - hi + r);
    const double r2 = r * r;
    const double q = pd_fma(hw, r2, pd_fma(hw, r, A4, A3), pd_fma(hw, r, A2, A1));
    return pd_fma(hw, r * r2, q, pd_fma(hw, r2, A0, lo)) + hi;
}

PD_LIBM_DEFINE1(pd_log, log_body)
