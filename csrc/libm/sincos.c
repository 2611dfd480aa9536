/* sin and cos, the IBM accurate method: |x| < 2^-26 and the ranges near 0 and pi/2 directly;
 * otherwise x = n pi/2 + (a + da) (reduce_quadrant below 105414350, pd_branred above), then
 * sin or cos of a + da as a table value at the nearest k/128 plus Taylor corrections. */
#include "sincos.h"
#include "branred.h"
#include "pd_libm_bits.h"
#include "pd_libm_data.h"

/* sin(a) ~ a + a^3 (s1 + a^2 (s2 + ...)) for |a| < 0.126 */
static const double s1 = -0x1.5555555555555p-3, s2 = 0x1.1111111110ecep-7,
                    s3 = -0x1.a01a019db08b8p-13, s4 = 0x1.71de27b9a7ed9p-19,
                    s5 = -0x1.addffc2fcdf59p-26;
/* corrections around the table point: sin and cos of the small remainder */
static const double sn3 = -0x1.5555555555515p-3, sn5 = 0x1.11110e829872fp-7;
static const double cs2 = 0x1p-1, cs4 = -0x1.5555555555535p-5, cs6 = 0x1.6c16bedd9e239p-10;
static const double big = 0x1.8p45; /* adding it rounds |x| to a multiple of 1/128 */
static const double hp0 = 0x1.921fb54442d18p0, hp1 = 0x1.1a62633145c07p-54; /* pi/2 = hp0 + hp1 */
static const double hpinv = 0x1.45f306dc9c883p-1, toint = 0x1.8p52;
static const double mp1 = 0x1.921fb58000000p0, mp2 = -0x1.dde973c000000p-27;
static const double pp3 = -0x1.cb3b398000000p-55, pp4 = -0x1.d747f23e32ed7p-83;

typedef struct { double sn, ssn, cs, ccs; } table_point;

/* The table point nearest |x| (u = big + |x|) and the remainder |x| - point. */
PD_LIBM_INLINE table_point lookup(double ax, double *rem) {
    const double u = big + ax;
    *rem = ax - (u - big);
    const int k = (int)(uint32_t)pd_bits(u) << 2;
    const table_point t = {pd_sincos_table[k], pd_sincos_table[k + 1], pd_sincos_table[k + 2],
                           pd_sincos_table[k + 3]};
    return t;
}

/* cos(x + dx) */
PD_LIBM_INLINE double cos_at(int hw, double x, double dx) {
    if (x < 0) dx = -dx;
    double y;
    const table_point t = lookup(fabs(x), &y);
    y = y + dx;
    const double yy = y * y;
    const double s = pd_fma(hw, y * yy, pd_fma(hw, yy, sn5, sn3), y);
    const double c = yy * pd_fma(hw, yy, pd_fma(hw, yy, cs6, cs4), cs2);
    const double cor = pd_fma(hw, -t.sn, s, pd_fma(hw, -c, t.cs, pd_fma(hw, -s, t.ssn, t.ccs)));
    return t.cs + cor;
}

/* sin(x + dx) */
PD_LIBM_INLINE double sin_at(int hw, double x, double dx) {
    if (fabs(x) < 0.126) { /* Taylor series around 0 */
        const double xx = x * x;
        const double p = pd_fma(hw, pd_fma(hw, pd_fma(hw, pd_fma(hw, s5, xx, s4), xx, s3), xx, s2), xx, s1);
        return x + pd_fma(hw, pd_fma(hw, p, x, -(0.5 * dx)), xx, dx);
    }
    const double xold = x;
    if (x <= 0) dx = -dx;
    double y;
    const table_point t = lookup(fabs(x), &y);
    const double yy = y * y;
    const double s = y + pd_fma(hw, y * yy, pd_fma(hw, yy, sn5, sn3), dx);
    const double c = pd_fma(hw, y, dx, yy * pd_fma(hw, yy, pd_fma(hw, yy, cs6, cs4), cs2));
    const double cor = pd_fma(hw, s, t.cs, pd_fma(hw, -c, t.sn, pd_fma(hw, s, t.ccs, t.ssn)));
    return copysign(t.sn + cor, xold);
}

/* x = n pi/2 + (a + da) for |x| < 105414350, pi/2 carried to about 136 bits; returns n mod 4. */
PD_LIBM_INLINE int reduce_quadrant(int hw, double x, double *a, double *da) {
    const double t = pd_fma(hw, x, hpinv, toint);
    const double xn = t - toint;
    const double y = pd_fma(hw, -xn, mp2, pd_fma(hw, -xn, mp1, x));
    const double t2 = pd_fma(hw, -xn, pp3, y);
    double db = pd_fma(hw, -xn, pp3, y - t2);
    const double b = pd_fma(hw, -xn, pp4, t2);
    db = db + pd_fma(hw, -xn, pp4, t2 - b);
    *a = b;
    *da = db;
    return (int)(pd_bits(t) & 3);
}

PD_LIBM_INLINE double in_quadrant(int hw, double a, double da, int n) {
    const double v = (n & 1) ? cos_at(hw, a, da) : sin_at(hw, a, da);
    return (n & 2) ? -v : v;
}

PD_LIBM_INLINE double sin_body(int hw, double x) {
    const uint32_t k = (uint32_t)(pd_bits(x) >> 32) & 0x7fffffffu;
    double a, da;
    if (k < 0x3e500000u) return x;               /* |x| < 2^-26 */
    if (k < 0x3feb6000u) return sin_at(hw, x, 0.0);  /* |x| < 0.855469 */
    if (k < 0x400368fdu) return copysign(cos_at(hw, hp0 - fabs(x), hp1), x); /* |x| < 2.426265 */
    if (k < 0x419921fbu) {                        /* |x| < 105414350 */
        const int n = reduce_quadrant(hw, x, &a, &da);
        return in_quadrant(hw, a, da, n);
    }
    if (k < 0x7ff00000u) {
        const int n = pd_branred(x, &a, &da);
        return in_quadrant(hw, a, da, n);
    }
    return x / x; /* inf, nan */
}

PD_LIBM_INLINE double cos_body(int hw, double x) {
    const uint32_t k = (uint32_t)(pd_bits(x) >> 32) & 0x7fffffffu;
    double a, da;
    if (k < 0x3e400000u) return 1.0;             /* |x| < 2^-27 */
    if (k < 0x3feb6000u) return cos_at(hw, x, 0.0);  /* |x| < 0.855469 */
    if (k < 0x400368fdu) {                        /* |x| < 2.426265: sin(pi/2 - |x|) */
        const double y = hp0 - fabs(x);
        a = y + hp1;
        da = (y - a) + hp1;
        return sin_at(hw, a, da);
    }
    if (k < 0x419921fbu) {
        const int n = reduce_quadrant(hw, x, &a, &da);
        return in_quadrant(hw, a, da, n + 1);
    }
    if (k < 0x7ff00000u) {
        const int n = pd_branred(x, &a, &da);
        return in_quadrant(hw, a, da, n + 1);
    }
    return x / x;
}

PD_LIBM_DEFINE1(pd_sin, sin_body)
PD_LIBM_DEFINE1(pd_cos, cos_body)
