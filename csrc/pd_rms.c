/* SPDX-License-Identifier: MIT */
#include "pd_rms.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define PD_RMS_SAFE 0x1p-511 /* |y| >= this: y*y is a normal number */
#define PD_RMS_LANES 8       /* arrays summed side by side: independent chains hide the add's latency */

/* float32 values: every nonzero |x| >= 2^-149, so with |scale| >= 2^-362 every nonzero
 * |y| >= 2^-511 (rounding is monotonic and 2^-511 a double): no magnitude scan is needed. */
#define PD_RMS_FLOAT_SCALE_SAFE 0x1p-362

/* The largest magnitude and the smallest nonzero one of a row of float64, as bit patterns with
 * the sign cleared (ordered like the magnitudes; NaN and infinity above every finite value). */
static void pd_rms_row_range(const double *x, size_t n, int64_t *hi, int64_t *lo) {
    int64_t h = *hi, l = *lo;
    for (size_t f = 0; f < n; f++) {
        int64_t b;
        memcpy(&b, &x[f], sizeof b);
        b &= INT64_MAX;
        int64_t z = b ? b : INT64_MAX;
        h = b > h ? b : h;
        l = z < l ? z : l;
    }
    *hi = h;
    *lo = l;
}

/* Whether the extremes of |x| keep every y = x * scale finite, 0 or at least PD_RMS_SAFE, and at
 * most limit: rounding is monotonic, so |y|'s extremes are those of |x| scaled. A smallest
 * nonzero x that scales below PD_RMS_SAFE (to 0 or not) gives no, which only sends the array to
 * the caller's exact path. */
static int pd_rms_extremes_in_range(int64_t hi, int64_t lo, double scale, double limit) {
    double big, small, c = fabs(scale);
    memcpy(&big, &hi, sizeof big);
    memcpy(&small, &lo, sizeof small);
    if (!(big * c <= limit)) return 0; /* NaN, infinity or too large */
    return lo == INT64_MAX || small * c >= PD_RMS_SAFE;
}

/* Up to PD_RMS_LANES arrays of one element type: each keeps its own strictly sequential chain,
 * the chains advance together; idle lanes repeat the first array and are dropped. */
#define PD_RMS_GROUP(T)                                                                            \
    static void pd_rms_group_##T(pd_rms_array *a, size_t n, const unsigned char *valid,          \
                                 size_t positions, size_t features) {                             \
        const T *x[PD_RMS_LANES];                                                                 \
        double s[PD_RMS_LANES], c[PD_RMS_LANES];                                                  \
        for (size_t j = 0; j < PD_RMS_LANES; j++) {                                               \
            x[j] = (const T *)a[j < n ? j : 0].data;                                              \
            c[j] = a[j < n ? j : 0].scale;                                                        \
            s[j] = 0.0;                                                                           \
        }                                                                                         \
        for (size_t p = 0; p < positions; p++) {                                                  \
            if (!valid[p]) continue;                                                              \
            for (size_t f = p * features; f < (p + 1) * features; f++) {                          \
                for (size_t j = 0; j < PD_RMS_LANES; j++) {                                       \
                    double y = (double)x[j][f] * c[j];                                            \
                    double sq = y * y;                                                            \
                    s[j] = s[j] + sq;                                                             \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        for (size_t j = 0; j < n; j++) a[j].sum = s[j];                                           \
    }
PD_RMS_GROUP(float)
PD_RMS_GROUP(double)

/* Whether a's values all lie where the sum is the contract's: the scan of float64 (or of float32
 * under a tiny scale) checks the extremes; the sum itself bounds the largest |y| (each square is
 * at most the sum, and at most a quarter of DBL_MAX / count keeps |y| below limit) and is
 * non-finite when a value is. */
static int pd_rms_in_range(const pd_rms_array *a, const unsigned char *valid, size_t positions,
                           size_t features, double limit, double count) {
    if (!isfinite(a->sum) || !(a->sum <= DBL_MAX / count / 4.0)) return 0;
    if (a->dtype == PD_RMS_FLOAT32 && fabs(a->scale) >= PD_RMS_FLOAT_SCALE_SAFE) return 1;
    if (a->dtype == PD_RMS_FLOAT32) return 0; /* a scale this small: the exact path decides */
    int64_t hi = 0, lo = INT64_MAX;
    for (size_t p = 0; p < positions; p++) {
        if (valid[p]) pd_rms_row_range((const double *)a->data + p * features, features, &hi, &lo);
    }
    return pd_rms_extremes_in_range(hi, lo, a->scale, limit);
}

void pd_rms_sums(pd_rms_array *arrays, size_t count, const unsigned char *valid, size_t positions,
                 size_t features, double limit) {
    size_t kept = 0;
    for (size_t p = 0; p < positions; p++) kept += valid[p] != 0;
    double n = (double)kept * (double)features;
    size_t i = 0;
    while (i < count) { /* consecutive arrays of one element type, PD_RMS_LANES at most */
        size_t k = 1;
        while (i + k < count && k < PD_RMS_LANES && arrays[i + k].dtype == arrays[i].dtype) k++;
        if (arrays[i].dtype == PD_RMS_FLOAT32) {
            pd_rms_group_float(&arrays[i], k, valid, positions, features);
        } else {
            pd_rms_group_double(&arrays[i], k, valid, positions, features);
        }
        i += k;
    }
    for (i = 0; i < count; i++) {
        arrays[i].in_range = n > 0.0 && pd_rms_in_range(&arrays[i], valid, positions, features, limit, n);
    }
}
