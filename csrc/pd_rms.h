/* SPDX-License-Identifier: MIT */
/* Sums of squares behind the residual-health RMS (docs/numerics.md §9): one sequential sum per
 * array, several arrays' sums interleaved so their dependency chains overlap. */
#ifndef PD_RMS_H
#define PD_RMS_H
#include <stddef.h>

/* Element types an array may hold; each element is widened to double exactly. */
typedef enum { PD_RMS_FLOAT32 = 0, PD_RMS_FLOAT64 = 1 } pd_rms_dtype;

/* One array [positions, features] (row-major, contiguous) and what its sum gave. */
typedef struct {
    const void *data;
    int dtype;       /* a pd_rms_dtype */
    double scale;    /* y = (double)x * scale, one rounding (1.0: y = x) */
    double sum;      /* out: +0.0 + y0*y0 + y1*y1 + ... over the valid positions, in row-major order */
    int in_range;    /* out: 1 when every y is finite, 0 or |y| >= 2^-511, and |y| <= limit */
} pd_rms_array;

/* Fills sum and in_range of each of the count arrays; valid[p] != 0 selects position p. A sum
 * whose array is not in range is still computed but means nothing (the caller rescales). */
void pd_rms_sums(pd_rms_array *arrays, size_t count, const unsigned char *valid, size_t positions,
                 size_t features, double limit);

#endif
