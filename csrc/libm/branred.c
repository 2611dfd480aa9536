/* Reduction of a large |x| (>= 105414350) to x = n pi/2 + (a + aa), |a + aa| < pi/4, with 2/pi
 * in 24-bit pieces (the IBM method). The reference builds this part without fused operations. */
#include "branred.h"
#include "pd_libm_bits.h"

/* 2/pi in base 2^24 digits */
static const double two_over_pi[75] = {
    10680707.0, 7228996.0,  1387004.0,  2578385.0,  16069853.0, 12639074.0, 9804092.0,
    4427841.0,  16666979.0, 11263675.0, 12935607.0, 2387514.0,  4345298.0,  14681673.0,
    3074569.0,  13734428.0, 16653803.0, 1880361.0,  10960616.0, 8533493.0,  3062596.0,
    8710556.0,  7349940.0,  6258241.0,  3772886.0,  3769171.0,  3798172.0,  8675211.0,
    12450088.0, 3874808.0,  9961438.0,  366607.0,   15675153.0, 9132554.0,  7151469.0,
    3571407.0,  2607881.0,  12013382.0, 4155038.0,  6285869.0,  7677882.0,  13102053.0,
    15825725.0, 473591.0,   9065106.0,  15363067.0, 6271263.0,  9264392.0,  5636912.0,
    4652155.0,  7056368.0,  13614112.0, 10155062.0, 1944035.0,  9527646.0,  15080200.0,
    6658437.0,  6231200.0,  6832269.0,  16767104.0, 5075751.0,  3212806.0,  1398474.0,
    7579849.0,  6349435.0,  12618859.0, 4703257.0,  12806093.0, 14477321.0, 2786137.0,
    12875403.0, 9837734.0,  14528324.0, 13719321.0, 343717.0};

static const double split = 134217729.0; /* 2^27 + 1 */
static const double big = 0x1.8p52, big1 = 0x1.8p54;
static const double hp0 = 0x1.921fb54442d18p0, hp1 = 0x1.1a62633145c07p-54;
static const double mp1 = 0x1.921fb58000000p0, mp2 = -0x1.dde9740000000p-27;

/* x1 * 2/pi for one 27-bit half x1 of the (scaled) input: integer part mod 4 in *sum, the
 * fraction as *b + *bb. */
static void half_product(double x1, double *sum_out, double *b_out, double *bb_out) {
    double r[6], sum = 0.0;
    int k = (int)((pd_bits(x1) >> 52) & 2047);
    k = (k - 450) / 24;
    if (k < 0) k = 0;
    double gor = pd_from_bits(pd_bits(0x1p576) - ((uint64_t)(k * 24) << 52));
    for (int i = 0; i < 6; i++) {
        r[i] = x1 * two_over_pi[k + i] * gor;
        gor = gor * 0x1p-24;
    }
    for (int i = 0; i < 3; i++) { /* drop whole numbers, keep the fractions */
        const double s = (r[i] + big) - big;
        sum = sum + s;
        r[i] = r[i] - s;
    }
    double t = 0.0;
    for (int i = 0; i < 6; i++) t = t + r[5 - i];
    double bb = (((((r[0] - t) + r[1]) + r[2]) + r[3]) + r[4]) + r[5];
    double s = (t + big) - big;
    sum = sum + s;
    t = t - s;
    const double b = t + bb;
    bb = (t - b) + bb;
    s = (sum + big1) - big1;
    sum = sum - s;
    *sum_out = sum;
    *b_out = b;
    *bb_out = bb;
}

int pd_branred(double x, double *a, double *aa) {
    x = x * 0x1p-600;
    double t = x * split; /* x = x1 + x2, each with at most 27 significant bits */
    const double x1 = t - (t - x);
    const double x2 = x - x1;
    double sum1, b1, bb1, sum2, b2, bb2;
    half_product(x1, &sum1, &b1, &bb1);
    half_product(x2, &sum2, &b2, &bb2);
    double sum = sum1 + sum2;
    double b = b1 + b2;
    double bb = (fabs(b1) > fabs(b2)) ? (b1 - b) + b2 : (b2 - b) + b1;
    if (b > 0.5) {
        b = b - 1.0;
        sum = sum + 1.0;
    } else if (b < -0.5) {
        b = b + 1.0;
        sum = sum - 1.0;
    }
    double s = b + (bb + bb1 + bb2);
    t = ((b - s) + bb) + (bb1 + bb2);
    b = s * split;
    const double t1 = b - (b - s);
    const double t2 = s - t1;
    b = s * hp0;
    bb = (((t1 * mp1 - b) + t1 * mp2) + t2 * mp1) + (t2 * mp2 + s * hp1 + t * hp0);
    s = b + bb;
    t = (b - s) + bb;
    *a = s;
    *aa = t;
    return ((int)sum) & 3;
}
