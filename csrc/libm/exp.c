/* exp: the table-driven algorithm of exp_core.h (N = 128, degree-5 polynomial). */
#include "exp.h"
#include "exp_core.h"

static uint32_t top12(double x) { return (uint32_t)(pd_bits(x) >> 52); }

/* k > 0: scale may overflow, so compute at 2^-1009 and scale back up.
 * k < 0: below 1.0 round the sum once more before the final scaling into subnormals, so the
 * result is rounded once (the sum and the 1.0 offset are computed unfused, as the reference does).
 * Signed scale comes from pow with a negative base; zero keeps the sign of scale. */
double pd_exp_scale_special(int hw, double tmp, uint64_t sbits, uint64_t ki) {
    if ((ki & 0x80000000u) == 0) {
        const double scale = pd_from_bits(sbits - (1009ull << 52));
        return pd_fma(hw, scale, tmp, scale) * 0x1p1009;
    }
    sbits += 1022ull << 52;
    const double scale = pd_from_bits(sbits);
    const double st = scale * tmp;
    double y = scale + st;
    if (fabs(y) < 1.0) {
        const double one = y < 0.0 ? -1.0 : 1.0;
        double lo = scale - y + st;
        const double hi = one + y;
        lo = one - hi + y + lo;
        y = (hi + lo) - one;
        if (y == 0.0) y = pd_from_bits(sbits & 0x8000000000000000ull);
    }
    return 0x1p-1022 * y;
}

PD_LIBM_INLINE double exp_body(int hw, double x) {
    uint32_t abstop = top12(x) & 0x7ff;
    if (abstop - top12(0x1p-54) >= top12(512.0) - top12(0x1p-54)) {
        if (abstop - top12(0x1p-54) >= 0x80000000u) return 1.0 + x; /* |x| < 2^-54, also +-0 */
        if (abstop >= top12(1024.0)) {
            if (pd_bits(x) == pd_bits(-INFINITY)) return 0.0;
            if (abstop >= top12(INFINITY)) return 1.0 + x; /* +inf or NaN */
            return (pd_bits(x) >> 63) ? 0.0 : INFINITY;    /* certain underflow / overflow */
        }
        abstop = 0; /* 512 <= |x| < 1024: the result may leave the normal range */
    }
    const pd_exp_reduced e = pd_exp_reduce(hw, x, 0.0, 0, 0);
    if (abstop == 0) return pd_exp_scale_special(hw, e.tmp, e.sbits, e.ki);
    const double scale = pd_from_bits(e.sbits);
    return pd_fma(hw, scale, e.tmp, scale);
}

PD_LIBM_DEFINE1(pd_exp, exp_body)
