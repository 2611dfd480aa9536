/* log1p: 1 + x = 2^k (1 + f) with sqrt(2)/2 < 1 + f < sqrt(2) (plus a correction c/u for the
 * rounding of u = 1 + x); log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))) with s = f / (2 + f) and
 * R a degree-7 polynomial in s^2 (the fdlibm method). */
#include "log1p.h"
#include "pd_libm_bits.h"

static const double ln2_hi = 0x1.62e42fee00000p-1; /* k * ln2_hi is exact for |k| < 2000 */
static const double ln2_lo = 0x1.a39ef35793c76p-33;
static const double Lp1 = 0x1.5555555555593p-1, Lp2 = 0x1.999999997fa04p-2,
                    Lp3 = 0x1.2492494229359p-2, Lp4 = 0x1.c71c51d8e78afp-3,
                    Lp5 = 0x1.7466496cb03dep-3, Lp6 = 0x1.39a09d078c69fp-3,
                    Lp7 = 0x1.2f112df3e5244p-3;

static uint32_t high_word(double x) { return (uint32_t)(pd_bits(x) >> 32); }

static double with_high_word(double x, uint32_t hi) {
    return pd_from_bits((pd_bits(x) & 0xffffffffull) | ((uint64_t)hi << 32));
}

PD_LIBM_INLINE double log1p_body(int hw, double x) {
    const int32_t hx = (int32_t)high_word(x);
    const int32_t ax = hx & 0x7fffffff;
    int32_t k = 1, hu = 0;
    double f = 0.0, c = 0.0;
    if (hx < 0x3fda827a) { /* x < 0.41422 */
        if (ax >= 0x3ff00000) { /* x <= -1 */
            if (x == -1.0) return -INFINITY;
            return (x - x) / (x - x);
        }
        if (ax < 0x3e200000) { /* |x| < 2^-29 */
            if (ax < 0x3c900000) return x; /* |x| < 2^-54 */
            return pd_fma(hw, -(x * x), 0.5, x);
        }
        if (hx > 0 || hx <= (int32_t)0xbfd2bec3) { /* -0.2929 < x < 0.41422: f = x exactly */
            k = 0;
            f = x;
            hu = 1;
        }
    } else if (hx >= 0x7ff00000) {
        return x + x;
    }
    if (k != 0) {
        double u;
        if (hx < 0x43400000) {
            u = 1.0 + x;
            hu = (int32_t)high_word(u);
            k = (hu >> 20) - 1023;
            c = (k > 0) ? 1.0 - (u - x) : x - (u - 1.0); /* the rounding error of u */
            c = c / u;
        } else {
            u = x;
            hu = (int32_t)high_word(u);
            k = (hu >> 20) - 1023;
            c = 0.0;
        }
        hu &= 0x000fffff;
        if (hu < 0x6a09e) { /* normalise u into [1, sqrt(2)) */
            u = with_high_word(u, (uint32_t)hu | 0x3ff00000u);
        } else { /* or u/2 into [sqrt(2)/2, 1) */
            k += 1;
            u = with_high_word(u, (uint32_t)hu | 0x3fe00000u);
            hu = (0x00100000 - hu) >> 2;
        }
        f = u - 1.0;
    }
    const double hfsq = (0.5 * f) * f;
    const double kd = (double)k;
    if (hu == 0) { /* |f| < 2^-20 */
        if (f == 0.0) {
            if (k == 0) return 0.0;
            return pd_fma(hw, kd, ln2_hi, pd_fma(hw, kd, ln2_lo, c));
        }
        const double R = pd_fma(hw, -f, 0.66666666666666666, 1.0) * hfsq;
        if (k == 0) return f - R;
        return pd_fma(hw, kd, ln2_hi, -((R - pd_fma(hw, kd, ln2_lo, c)) - f));
    }
    const double s = f / (2.0 + f);
    const double z = s * s, z2 = z * z, z4 = z2 * z2, z6 = z2 * z4;
    const double R2 = pd_fma(hw, z, Lp3, Lp2), R3 = pd_fma(hw, z, Lp5, Lp4), R4 = pd_fma(hw, z, Lp7, Lp6);
    const double R = pd_fma(hw, z6, R4, pd_fma(hw, z4, R3, pd_fma(hw, z, Lp1, z2 * R2)));
    const double sr = s * (hfsq + R); /* one product for both branches, never fused */
    if (k == 0) return f - (hfsq - sr);
    return pd_fma(hw, kd, ln2_hi, -((hfsq - (sr + pd_fma(hw, kd, ln2_lo, c))) - f));
}

PD_LIBM_DEFINE1(pd_log1p, log1p_body)
