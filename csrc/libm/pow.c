/* pow(x, y) = exp(y * log(x)): log(x) to about 68 bits as hi + lo from pd_pow_log_table
 * (degree-8 polynomial), y * (hi + lo) split exactly with a fused multiply-subtract, then the exp
 * core of exp_core.h with the low part added to its reduced argument. */
#include "pow.h"
#include "exp_core.h"

static const double ln2_hi = 0x1.62e42fefa3800p-1, ln2_lo = 0x1.ef35793c76730p-45;
/* log1p(r) ~ r + A0 r^2 + ar^3 (A1 + r A2 + ar^2 (A3 + r A4 + ar^2 (A5 + r A6))) with
 * ar = A0 r: the coefficients are pre-scaled by powers of -2 to suit that form */
static const double A0 = -0x1.0000000000000p-1, A1 = -0x1.5555555555560p-1,
                    A2 = 0x1.0000000000006p-1, A3 = 0x1.999999959554ep-1,
                    A4 = -0x1.555555529a47ap-1, A5 = -0x1.2495b9b4845e9p+0,
                    A6 = 0x1.0002b8b263fc3p+0;

#define OFF 0x3fe6955500000000ull
#define SIGN_BIAS (0x800ull << 7)

static uint32_t top12(double x) { return (uint32_t)(pd_bits(x) >> 52); }

/* log(x) = hi + *tail for the bits ix of a positive normal (or normalised subnormal) x. */
PD_LIBM_INLINE double log_hi_lo(int hw, uint64_t ix, double *tail) {
    const uint64_t tmp = ix - OFF;
    const int i = (int)((tmp >> (52 - 7)) % PD_POW_LOG_N);
    const int k = (int)((int64_t)tmp >> 52);
    const double z = pd_from_bits(ix - (tmp & 0xfffull << 52));
    const double kd = (double)k;
    const pd_pow_log_entry *t = &pd_pow_log_table[i];
    const double r = pd_fma(hw, z, t->invc, -1.0); /* exact */
    const double t1 = pd_fma(hw, kd, ln2_hi, t->logc);
    const double t2 = t1 + r;
    const double lo1 = pd_fma(hw, kd, ln2_lo, t->logctail);
    const double lo2 = t1 - t2 + r;
    const double ar = A0 * r, ar2 = r * ar, ar3 = r * ar2;
    const double hi = t2 + ar2;
    const double lo3 = pd_fma(hw, ar, r, -ar2); /* the rounding error of ar2 */
    const double lo4 = t2 - hi + ar2;
    const double q = pd_fma(hw, ar2, pd_fma(hw, ar2, pd_fma(hw, r, A6, A5), pd_fma(hw, r, A4, A3)),
                            pd_fma(hw, r, A2, A1));
    const double lo = pd_fma(hw, ar3, q, lo1 + lo2 + lo3 + lo4);
    const double y = hi + lo;
    *tail = hi - y + lo;
    return y;
}

/* sign * exp(x + xtail), |xtail| < 2^-8/N; sign_bias is SIGN_BIAS for a negative result. */
PD_LIBM_INLINE double exp_with_tail(int hw, double x, double xtail, uint64_t sign_bias) {
    uint32_t abstop = top12(x) & 0x7ff;
    if (abstop - top12(0x1p-54) >= top12(512.0) - top12(0x1p-54)) {
        if (abstop - top12(0x1p-54) >= 0x80000000u) {
            const double one = 1.0 + x;
            return sign_bias ? -one : one;
        }
        if (abstop >= top12(1024.0)) {
            const double v = (pd_bits(x) >> 63) ? 0.0 : INFINITY;
            return sign_bias ? -v : v;
        }
        abstop = 0;
    }
    const pd_exp_reduced e = pd_exp_reduce(hw, x, xtail, 1, sign_bias);
    if (abstop == 0) return pd_exp_scale_special(hw, e.tmp, e.sbits, e.ki);
    const double scale = pd_from_bits(e.sbits);
    return pd_fma(hw, scale, e.tmp, scale);
}

/* 0 if iy is not an integer, 1 if odd, 2 if even (iy: bits of a nonzero finite value). */
static int integer_kind(uint64_t iy) {
    const int e = (int)(iy >> 52 & 0x7ff);
    if (e < 0x3ff) return 0;
    if (e > 0x3ff + 52) return 2;
    if (iy & ((1ull << (0x3ff + 52 - e)) - 1)) return 0;
    if (iy & (1ull << (0x3ff + 52 - e))) return 1;
    return 2;
}

static int zero_inf_nan(uint64_t i) { return 2 * i - 1 >= 2 * pd_bits(INFINITY) - 1; }

static int is_signaling(double x) {
    return 2 * (pd_bits(x) ^ 0x0008000000000000ull) > 2 * 0x7ff8000000000000ull;
}

PD_LIBM_INLINE double pow_body(int hw, double x, double y) {
    uint64_t sign_bias = 0;
    uint64_t ix = pd_bits(x);
    const uint64_t iy = pd_bits(y);
    uint32_t topx = top12(x);
    const uint32_t topy = top12(y);
    if (topx - 0x001 >= 0x7ff - 0x001 || (topy & 0x7ff) - 0x3be >= 0x43e - 0x3be) {
        /* x subnormal, zero, inf, nan or negative; or |y| < 2^-65, |y| >= 2^63, y nan */
        if (zero_inf_nan(iy)) {
            if (2 * iy == 0) return is_signaling(x) ? x + y : 1.0;
            if (ix == pd_bits(1.0)) return is_signaling(y) ? x + y : 1.0;
            if (2 * ix > 2 * pd_bits(INFINITY) || 2 * iy > 2 * pd_bits(INFINITY)) return x + y;
            if (2 * ix == 2 * pd_bits(1.0)) return 1.0;
            if ((2 * ix < 2 * pd_bits(1.0)) == !(iy >> 63)) return 0.0;
            return y * y;
        }
        if (zero_inf_nan(ix)) {
            double x2 = x * x;
            if ((ix >> 63) && integer_kind(iy) == 1) x2 = -x2;
            return (iy >> 63) ? 1.0 / x2 : x2;
        }
        if (ix >> 63) { /* finite x < 0 */
            const int yint = integer_kind(iy);
            if (yint == 0) return (x - x) / (x - x);
            if (yint == 1) sign_bias = SIGN_BIAS;
            ix &= 0x7fffffffffffffffull;
            topx &= 0x7ff;
        }
        if ((topy & 0x7ff) - 0x3be >= 0x43e - 0x3be) {
            if (ix == pd_bits(1.0)) return 1.0;
            if ((topy & 0x7ff) < 0x3be) return ix > pd_bits(1.0) ? 1.0 + y : 1.0 - y;
            return (ix > pd_bits(1.0)) == (topy < 0x800) ? INFINITY : 0.0;
        }
        if (topx == 0) { /* subnormal x: normalise, the exponent becomes negative */
            ix = pd_bits(x * 0x1p52);
            ix &= 0x7fffffffffffffffull;
            ix -= 52ull << 52;
        }
    }
    double lo;
    const double hi = log_hi_lo(hw, ix, &lo);
    const double ehi = y * hi;
    const double elo = pd_fma(hw, y, lo, pd_fma(hw, y, hi, -ehi));
    return exp_with_tail(hw, ehi, elo, sign_bias);
}

PD_LIBM_DEFINE2(pd_pow, pow_body)
